"""Names for raw storage keys: ``Pallet.Item`` where the key's 32-byte prefix is a known one."""

from __future__ import annotations

from functools import lru_cache

from ops_tools.chainspec.hashing import storage_prefix, twox_128

# Well-known FRAME items, plus the development node's pallets (docs/devnode.md).
KNOWN_ITEMS: dict[str, list[str]] = {
    "System": [
        "Account",
        "BlockHash",
        "Number",
        "ParentHash",
        "ExtrinsicCount",
        "Events",
        "EventCount",
        "LastRuntimeUpgrade",
        "UpgradedToU32RefCount",
        "UpgradedToTripleRefCount",
        "Digest",
        "BlockWeight",
        "AllExtrinsicsLen",
    ],
    "Balances": ["TotalIssuance", "InactiveIssuance", "Locks", "Reserves", "Holds", "Freezes"],
    "Timestamp": ["Now", "DidUpdate"],
    "Aura": ["Authorities", "CurrentSlot", "SlotDuration"],
    "Grandpa": ["Authorities", "CurrentSetId", "State", "PendingChange", "NextForced", "Stalled"],
    "Sudo": ["Key"],
    "TransactionPayment": ["NextFeeMultiplier", "StorageVersion", "FeeConfig"],
    "OperatorStake": [
        "Operators",
        "CurrentEpoch",
        "MinStake",
        "EpochLength",
        "MaxHeartbeatEpochAdvance",
    ],
    "BondingCurve": ["Calls"],
    "Consensus": ["Calls"],
    "Slashing": ["Calls"],
    "AttestationRegistry": ["Calls"],
    "OracleTwap": ["Calls"],
}
WELL_KNOWN_KEYS = {
    b":code": ":code (runtime)",
    b":heappages": ":heappages",
    b":extrinsic_index": ":extrinsic_index",
    b":grandpa_authorities": ":grandpa_authorities",
}


@lru_cache(maxsize=1)
def _tables() -> tuple[dict[bytes, str], dict[bytes, str]]:
    items = {storage_prefix(p, i): f"{p}.{i}" for p, names in KNOWN_ITEMS.items() for i in names}
    pallets = {twox_128(p.encode()): p for p in KNOWN_ITEMS}
    for pallet in KNOWN_ITEMS:
        items[twox_128(pallet.encode()) + twox_128(b":__STORAGE_VERSION__:")] = (
            f"{pallet}.:__STORAGE_VERSION__:"
        )
    return items, pallets


def name_key(key: bytes) -> tuple[str, str]:
    """``(item, rest)``: the item's name (or the pallet's, or ``?``) and the key's hex remainder."""
    if key in WELL_KNOWN_KEYS:
        return WELL_KNOWN_KEYS[key], ""
    if key.startswith(b":child_storage:default:"):
        return ":child_storage:default:", key[len(b":child_storage:default:") :].hex()
    items, pallets = _tables()
    if len(key) >= 32 and key[:32] in items:
        return items[key[:32]], key[32:].hex()
    if len(key) >= 16 and key[:16] in pallets:
        return f"{pallets[key[:16]]}.?", key[16:].hex()
    return "?", key.hex()

"""The genesis builder: a plain spec's ``runtimeGenesis.patch`` to raw genesis storage.

Every setting that changes behaviour (slot duration, epoch length, MinStake, authorities,
balances, sudo, fees) is written to storage, so it is part of the genesis hash.
"""

from __future__ import annotations

from typing import Any

from ops_tools.devnode.crypto import account_from_ss58
from ops_tools.devnode.runtime.definitions import EXISTENTIAL_DEPOSIT
from ops_tools.devnode.runtime.state import State
from ops_tools.errors import InputError

DEFAULTS: dict[str, Any] = {
    "slotDurationMs": 6000,
    "minStake": 1_000_000_000_000,
    "epochLength": 100,
    "maxHeartbeatEpochAdvance": 1,
    "baseFee": 100_000_000,
    "lengthFee": 1_000_000,
    "weightFee": 1_000,
}
# Account flags of pallet-balances' "new logic" (set on every account since 2023).
NEW_LOGIC_FLAG = 1 << 127
_SECTIONS = {
    "system": set(),
    "balances": {"balances"},
    "aura": {"authorities", "slotDurationMs"},
    "grandpa": {"authorities"},
    "sudo": {"key"},
    "operatorStake": {"minStake", "epochLength", "maxHeartbeatEpochAdvance"},
    "transactionPayment": {"baseFee", "lengthFee", "weightFee"},
}


def _obj(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(f"{path}: expected an object, got {type(value).__name__}")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise InputError(f"{path}: expected a list, got {type(value).__name__}")
    return value


def _uint(value: Any, path: str, *, minimum: int = 0, bits: int = 128) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{path}: expected an integer, got {value!r}")
    if value < minimum or value >= 1 << bits:
        raise InputError(f"{path}: {value} is out of range (at least {minimum}, below 2^{bits})")
    return value


def _check_keys(section: dict[str, Any], allowed: set[str], path: str) -> None:
    for key in section:
        if key not in allowed:
            known = ", ".join(sorted(allowed)) or "none"
            raise InputError(f"{path}.{key}: unknown field; known fields: {known}")


def build_storage(code: bytes, patch: Any) -> dict[bytes, bytes]:
    """Raw genesis storage for ``patch``; raises InputError naming the first bad path."""
    patch = _obj(patch, "patch")
    _check_keys(patch, set(_SECTIONS), "patch")
    sections = {name: _obj(patch.get(name, {}), f"patch.{name}") for name in _SECTIONS}
    for name, allowed in _SECTIONS.items():
        _check_keys(sections[name], allowed, f"patch.{name}")
    state = State({b":code": code})

    total = 0
    seen: set[bytes] = set()
    for i, entry in enumerate(
        _list(sections["balances"].get("balances", []), "patch.balances.balances")
    ):
        path = f"patch.balances.balances[{i}]"
        if not isinstance(entry, list) or len(entry) != 2:
            raise InputError(f'{path}: expected ["<ss58 address>", <plancks>]')
        who = account_from_ss58(entry[0], f"{path}[0]")
        amount = _uint(entry[1], f"{path}[1]", minimum=EXISTENTIAL_DEPOSIT)
        if who in seen:
            raise InputError(f"{path}[0]: {entry[0]} is endowed twice; give each account once")
        seen.add(who)
        total += amount
        state.put(
            "System",
            "Account",
            {
                "nonce": 0,
                "consumers": 0,
                "providers": 1,
                "sufficients": 0,
                "data": {"free": amount, "reserved": 0, "frozen": 0, "flags": NEW_LOGIC_FLAG},
            },
            who,
        )
    state.put("Balances", "TotalIssuance", _uint(total, "patch.balances (total issuance)"))

    aura = sections["aura"]
    authorities = [
        account_from_ss58(a, f"patch.aura.authorities[{i}]")
        for i, a in enumerate(_list(aura.get("authorities", []), "patch.aura.authorities"))
    ]
    state.put("Aura", "Authorities", authorities)
    slot = _uint(
        aura.get("slotDurationMs", DEFAULTS["slotDurationMs"]),
        "patch.aura.slotDurationMs",
        minimum=10,  # short slots serve tests and benchmarks
        bits=64,
    )
    state.put("Aura", "SlotDuration", slot)

    grandpa = []
    for i, entry in enumerate(
        _list(sections["grandpa"].get("authorities", []), "patch.grandpa.authorities")
    ):
        path = f"patch.grandpa.authorities[{i}]"
        if not isinstance(entry, list) or len(entry) != 2:
            raise InputError(f'{path}: expected ["<ss58 of an ed25519 key>", <weight>]')
        grandpa.append(
            (
                account_from_ss58(entry[0], f"{path}[0]"),
                _uint(entry[1], f"{path}[1]", minimum=1, bits=64),
            )
        )
    state.put("Grandpa", "Authorities", grandpa)

    if "key" in sections["sudo"]:
        state.put("Sudo", "Key", account_from_ss58(sections["sudo"]["key"], "patch.sudo.key"))

    stake = sections["operatorStake"]

    def opt(
        section: dict[str, Any], name: str, sect: str, minimum: int = 0, bits: int = 128
    ) -> int:
        return _uint(
            section.get(name, DEFAULTS[name]), f"patch.{sect}.{name}", minimum=minimum, bits=bits
        )

    state.put(
        "OperatorStake",
        "Params",
        {
            "min_stake": opt(stake, "minStake", "operatorStake"),
            "epoch_length": opt(stake, "epochLength", "operatorStake", minimum=1, bits=32),
            "max_heartbeat_epoch_advance": opt(
                stake, "maxHeartbeatEpochAdvance", "operatorStake", bits=64
            ),
        },
    )
    fees = sections["transactionPayment"]
    state.put(
        "TransactionPayment",
        "FeeParams",
        {
            "base_fee": opt(fees, "baseFee", "transactionPayment"),
            "length_fee": opt(fees, "lengthFee", "transactionPayment"),
            "weight_fee": opt(fees, "weightFee", "transactionPayment"),
        },
    )
    state.put("TransactionPayment", "NextFeeMultiplier", 10**18)
    return state.data

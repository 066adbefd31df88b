"""The worker announcement: a worker tells the gateway where it is and what it serves.

Payload (JSON object, exactly these keys)::

    {"scheme": "net-worker-announce-v1", "operator": "<ss58>", "endpoint": "http://...",
     "models": ["..."], "capacity": <int>, "timestamp": <u64 unix seconds>,
     "genesis_hash": "0x<32 bytes>", "signature": "0x<64 bytes>"}

Signed message::

    b"net-worker-announce-v1" || genesis_hash (32) || operator account id (32)
    || timestamp (u64 LE) || sha256(canonical JSON of {"capacity", "endpoint", "models"}) (32)

sr25519 over those bytes, as the gateway heartbeat (``ops_tools.chain.wire.heartbeat``): the
scheme tag separates it from heartbeats and extrinsics, the genesis hash binds it to one network.
The gateway accepts an announcement only when its timestamp is within ``max_skew_s`` of its clock,
so a captured one cannot be replayed later to point traffic elsewhere.
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Mapping
from typing import Any

import orjson
import sr25519
from substrateinterface import Keypair
from substrateinterface.utils.ss58 import ss58_decode, ss58_encode

from ops_tools.chain.keys import SS58_FORMAT

ANNOUNCE_SCHEME = "net-worker-announce-v1"
PAYLOAD_KEYS = frozenset(
    {"scheme", "operator", "endpoint", "models", "capacity", "timestamp", "genesis_hash",
     "signature"}
)
_HASH_RE = re.compile(r"^0x[0-9a-f]{64}$")
_SIG_RE = re.compile(r"^0x[0-9a-f]{128}$")
_ENDPOINT_RE = re.compile(r"^https?://[^\s/]+(/[^\s]*)?$")


def _details_digest(endpoint: str, models: list[str], capacity: int) -> bytes:
    doc = {"capacity": capacity, "endpoint": endpoint, "models": models}
    return hashlib.sha256(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)).digest()


def canonical_message(
    genesis: bytes, account_id: bytes, timestamp: int, endpoint: str, models: list[str],
    capacity: int,
) -> bytes:
    return (
        ANNOUNCE_SCHEME.encode("ascii") + genesis + account_id + struct.pack("<Q", timestamp)
        + _details_digest(endpoint, models, capacity)
    )


def sign_announce(
    keypair: Keypair, *, endpoint: str, models: list[str], capacity: int, timestamp: int,
    genesis_hash: str,
) -> dict[str, Any]:
    genesis = bytes.fromhex(genesis_hash.removeprefix("0x"))
    message = canonical_message(genesis, keypair.public_key, timestamp, endpoint, models, capacity)
    return {
        "scheme": ANNOUNCE_SCHEME,
        "operator": ss58_encode(keypair.public_key, SS58_FORMAT),
        "endpoint": endpoint,
        "models": models,
        "capacity": capacity,
        "timestamp": timestamp,
        "genesis_hash": "0x" + genesis.hex(),
        "signature": "0x" + keypair.sign(message).hex(),
    }


def verify_announce(
    payload: Any, *, expected_genesis_hash: str, now: float, max_skew_s: float = 120.0
) -> str | None:
    """None when ``payload`` is a valid, fresh announcement for this network, else why not."""
    if not isinstance(payload, Mapping) or set(payload) != PAYLOAD_KEYS:
        return f"the announcement must have exactly the keys {sorted(PAYLOAD_KEYS)}"
    if payload["scheme"] != ANNOUNCE_SCHEME:
        return f"scheme must be {ANNOUNCE_SCHEME!r}"
    endpoint, models, capacity = payload["endpoint"], payload["models"], payload["capacity"]
    timestamp, genesis_hex = payload["timestamp"], payload["genesis_hash"]
    if not (isinstance(endpoint, str) and _ENDPOINT_RE.fullmatch(endpoint)):
        return f"endpoint {endpoint!r} is not an http(s) URL"
    if not (isinstance(models, list) and models
            and all(isinstance(m, str) and 0 < len(m) <= 200 for m in models)):
        return "models must be a non-empty list of model names"
    if not (isinstance(capacity, int) and not isinstance(capacity, bool) and 1 <= capacity
            <= 100_000):
        return f"capacity {capacity!r} must be an integer from 1 to 100000"
    if not (isinstance(timestamp, int) and not isinstance(timestamp, bool) and timestamp >= 0):
        return "timestamp must be unix seconds"
    if abs(now - timestamp) > max_skew_s:
        return f"timestamp {timestamp} is over {max_skew_s:g} s from the gateway's clock"
    if not (isinstance(genesis_hex, str) and _HASH_RE.fullmatch(genesis_hex)):
        return "genesis_hash must be 0x and 64 lowercase hex digits"
    if genesis_hex != expected_genesis_hash.lower():
        return f"genesis_hash {genesis_hex} is not this network's ({expected_genesis_hash})"
    signature = payload["signature"]
    if not (isinstance(signature, str) and _SIG_RE.fullmatch(signature)):
        return "signature must be 0x and 128 lowercase hex digits"
    try:
        account = bytes.fromhex(ss58_decode(payload["operator"], valid_ss58_format=SS58_FORMAT))
    except Exception:
        return f"operator {payload['operator']!r} is not an ss58 address (prefix 42)"
    message = canonical_message(
        bytes.fromhex(genesis_hex[2:]), account, timestamp, endpoint, models, capacity
    )
    try:
        ok = sr25519.verify(bytes.fromhex(signature[2:]), message, account)
    except Exception:
        ok = False
    return None if ok else "the signature does not verify for that operator"

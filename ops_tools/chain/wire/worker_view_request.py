"""The signed request for an operator's own view of its workers at the gateway.

The gateway shows a worker only to its operator (the list of every worker stays on loopback
and the private network, docs/gateway.md). Payload (JSON object, exactly these keys)::

    {"scheme": "net-worker-view-v1", "operator": "<ss58, prefix 42>",
     "timestamp": <u64 unix seconds>, "genesis_hash": "0x<32 bytes>", "signature": "0x<64 bytes>"}

Signed message (90 bytes)::

    b"net-worker-view-v1" || genesis_hash (32) || operator account id (32)
    || timestamp (u64 little-endian)

sr25519 over those bytes as they are, as the heartbeat (heartbeat_payload.py): the scheme tag
separates it from heartbeats, announcements and extrinsics, so none of them opens a view and a
view request moves nothing; the genesis hash binds it to one network. The gateway accepts it
only within ``max_skew_s`` of its clock, and it opens only the signer's own workers, so a
captured one shows nothing the operator could not already see, and only for a few minutes.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Mapping
from typing import Any

import sr25519
from substrateinterface import Keypair
from substrateinterface.utils.ss58 import ss58_decode, ss58_encode

from ops_tools.chain.keys import SS58_FORMAT

VIEW_SCHEME = "net-worker-view-v1"
PAYLOAD_KEYS = frozenset({"scheme", "operator", "timestamp", "genesis_hash", "signature"})
_U64_MAX = 2**64 - 1
_HASH_RE = re.compile(r"^0x[0-9a-f]{64}$")
_SIG_RE = re.compile(r"^0x[0-9a-f]{128}$")


def canonical_message(genesis_hash: bytes, account_id: bytes, timestamp: int) -> bytes:
    return VIEW_SCHEME.encode("ascii") + genesis_hash + account_id + struct.pack("<Q", timestamp)


def sign_view_request(keypair: Keypair, *, timestamp: int, genesis_hash: str) -> dict[str, Any]:
    genesis = bytes.fromhex(genesis_hash.removeprefix("0x"))
    message = canonical_message(genesis, keypair.public_key, timestamp)
    return {
        "scheme": VIEW_SCHEME,
        "operator": ss58_encode(keypair.public_key, SS58_FORMAT),
        "timestamp": timestamp,
        "genesis_hash": "0x" + genesis.hex(),
        "signature": "0x" + keypair.sign(message).hex(),
    }


def verify_view_request(
    payload: Any, *, expected_genesis_hash: str, now: float, max_skew_s: float
) -> str | None:
    """None when ``payload`` is a fresh view request signed by the operator it names for this
    network, else why not (never an exception: the payload is untrusted)."""
    if not isinstance(payload, Mapping) or set(payload) != PAYLOAD_KEYS:
        return f"the view request must have exactly the keys {sorted(PAYLOAD_KEYS)}"
    if payload["scheme"] != VIEW_SCHEME:
        return f"scheme must be {VIEW_SCHEME!r}"
    timestamp, genesis_hex = payload["timestamp"], payload["genesis_hash"]
    signature, operator = payload["signature"], payload["operator"]
    if not (isinstance(timestamp, int) and not isinstance(timestamp, bool)
            and 0 <= timestamp <= _U64_MAX):
        return "timestamp must be unix seconds"
    if abs(now - timestamp) > max_skew_s:
        return f"timestamp {timestamp} is over {max_skew_s:g} s from the gateway's clock"
    if not (isinstance(genesis_hex, str) and _HASH_RE.fullmatch(genesis_hex)):
        return "genesis_hash must be 0x and 64 lowercase hex digits"
    if genesis_hex != expected_genesis_hash.lower():
        return f"genesis_hash {genesis_hex} is not this network's ({expected_genesis_hash})"
    if not (isinstance(signature, str) and _SIG_RE.fullmatch(signature)):
        return "signature must be 0x and 128 lowercase hex digits"
    try:
        account = bytes.fromhex(ss58_decode(str(operator), valid_ss58_format=SS58_FORMAT))
    except Exception:  # ss58_decode raises ValueError, IndexError, ... on garbage
        return f"operator {str(operator)[:64]!r} is not an ss58 address (prefix 42)"
    message = canonical_message(bytes.fromhex(genesis_hex[2:]), account, timestamp)
    try:
        ok = sr25519.verify(bytes.fromhex(signature[2:]), message, account)
    except Exception:  # a public key that is not a valid ristretto point
        ok = False
    return None if ok else "the signature does not verify for that operator"

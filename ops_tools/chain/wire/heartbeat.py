"""The signed gateway heartbeat payload: canonical encoding, signing and verification.

Payload (JSON object, exactly these keys)::

    {"scheme": "net-heartbeat-v1", "operator": "<ss58, prefix 42>", "epoch": <u64>,
     "timestamp": <u64 unix seconds>, "genesis_hash": "0x<32 bytes>",
     "signature": "0x<64 bytes>"}

Signed message (96 bytes)::

    b"net-heartbeat-v1" || genesis_hash (32) || operator account id (32)
    || epoch (u64 little-endian) || timestamp (u64 little-endian)

The signature is sr25519 (schnorrkel, signing context ``b"substrate"``) over those bytes as they
are, without polkadot.js's ``<Bytes>`` wrapping: what ``sp_core::sr25519::Pair::sign`` and
substrate-interface's ``Keypair.sign`` produce. The scheme tag is the domain separator, so a
heartbeat signature can never be replayed as an extrinsic or any other signed message, and the
genesis hash binds it to one network (and one reset of it).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Mapping
from typing import Any

import sr25519
from substrateinterface import Keypair, KeypairType
from substrateinterface.utils.ss58 import ss58_decode, ss58_encode

from ops_tools.chain.keys import SS58_FORMAT

HEARTBEAT_SCHEME = "net-heartbeat-v1"
PAYLOAD_KEYS = frozenset({"scheme", "operator", "epoch", "timestamp", "genesis_hash", "signature"})
_U64_MAX = 2**64 - 1
_HASH_RE = re.compile(r"^0x[0-9a-f]{64}$")
_SIG_RE = re.compile(r"^0x[0-9a-f]{128}$")


def canonical_message(genesis_hash: bytes, account_id: bytes, epoch: int, timestamp: int) -> bytes:
    if len(genesis_hash) != 32 or len(account_id) != 32:
        raise ValueError("genesis hash and account id are 32 bytes each")
    if not (0 <= epoch <= _U64_MAX and 0 <= timestamp <= _U64_MAX):
        raise ValueError("epoch and timestamp are u64")
    return (
        HEARTBEAT_SCHEME.encode("ascii")
        + genesis_hash
        + account_id
        + struct.pack("<QQ", epoch, timestamp)
    )


def sign_heartbeat(
    keypair: Keypair, *, epoch: int, timestamp: int, genesis_hash: str
) -> dict[str, Any]:
    """The payload for ``keypair``; ``genesis_hash`` is the 0x-hex of ``chain_getBlockHash [0]``."""
    if keypair.crypto_type != KeypairType.SR25519:
        raise ValueError("heartbeats are signed with the sr25519 hotkey")
    genesis = bytes.fromhex(genesis_hash.removeprefix("0x"))
    message = canonical_message(genesis, keypair.public_key, epoch, timestamp)
    signature = keypair.sign(message)
    return {
        "scheme": HEARTBEAT_SCHEME,
        "operator": ss58_encode(keypair.public_key, SS58_FORMAT),
        "epoch": epoch,
        "timestamp": timestamp,
        "genesis_hash": "0x" + genesis.hex(),
        "signature": "0x" + signature.hex(),
    }


def _u64(value: Any) -> bool:
    # bool is an int subclass; true/false in JSON is not an epoch.
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _U64_MAX


def verify_heartbeat_payload(
    payload: Mapping[str, Any], expected_genesis_hash: str | None = None
) -> bool:
    """True iff ``payload`` is well-formed and signed by the operator it names.

    Any malformed, missing, extra or altered field gives False (never an exception), so a
    gateway can call it on untrusted input. With ``expected_genesis_hash`` the payload must also
    belong to that network.
    """
    if not isinstance(payload, Mapping) or set(payload) != PAYLOAD_KEYS:
        return False
    if payload["scheme"] != HEARTBEAT_SCHEME:
        return False
    epoch, timestamp = payload["epoch"], payload["timestamp"]
    genesis_hex, signature_hex, operator = (
        payload["genesis_hash"], payload["signature"], payload["operator"],
    )
    if not (_u64(epoch) and _u64(timestamp)):
        return False
    if not (isinstance(genesis_hex, str) and _HASH_RE.fullmatch(genesis_hex)):
        return False
    if not (isinstance(signature_hex, str) and _SIG_RE.fullmatch(signature_hex)):
        return False
    if expected_genesis_hash is not None and genesis_hex != expected_genesis_hash.lower():
        return False
    if not isinstance(operator, str):
        return False
    try:
        account_id = bytes.fromhex(ss58_decode(operator, valid_ss58_format=SS58_FORMAT))
    except Exception:  # ss58_decode raises ValueError, IndexError, ... on garbage
        return False
    message = canonical_message(bytes.fromhex(genesis_hex[2:]), account_id, epoch, timestamp)
    try:
        return bool(sr25519.verify(bytes.fromhex(signature_hex[2:]), message, account_id))
    except Exception:  # a public key that is not a valid ristretto point
        return False

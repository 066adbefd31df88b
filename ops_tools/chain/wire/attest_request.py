"""The signed attestation report request (``POST /v1/attest``): what the wallet signs and the
attestation service verifies::

    b"NET-attestation-request-v1" || 0x00 || genesis hash (32) || account id (32)
    || nonce (32) || signed_at (u64 little-endian, unix seconds) || UTF-8(operator_id)

sr25519 over those bytes as they are (``Keypair.sign``); everything before ``operator_id`` has a
fixed length, so the encoding is unambiguous.
"""

from __future__ import annotations

import struct

REQUEST_SCHEME = b"NET-attestation-request-v1\x00"
_U64_MAX = 2**64 - 1


def request_message(genesis_hash: str, account_id: bytes, nonce: bytes, signed_at: int,
                    operator_id: str) -> bytes:
    """The bytes a signed report request signs."""
    genesis = bytes.fromhex(genesis_hash.removeprefix("0x"))
    if len(genesis) != 32 or len(account_id) != 32 or len(nonce) != 32:
        raise ValueError("genesis hash, account id and nonce are 32 bytes each")
    if not 0 <= signed_at <= _U64_MAX:
        raise ValueError("signed_at is a u64")
    return (REQUEST_SCHEME + genesis + account_id + nonce + struct.pack("<Q", signed_at)
            + operator_id.encode("utf-8"))

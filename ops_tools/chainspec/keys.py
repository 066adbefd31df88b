"""Validation of the public identifiers a network definition holds: accounts, session keys,
libp2p peer ids."""

from __future__ import annotations

import base58
import nacl.bindings
import sr25519
from scalecodec.utils.ss58 import ss58_decode

# An identity multihash (0x00, length 36) of the protobuf PublicKey {type: Ed25519, data: 32 B}.
_PEER_ID_PREFIX = bytes([0x00, 0x24, 0x08, 0x01, 0x12, 0x20])


class InvalidKey(ValueError):
    """A public key or address that is not valid; the message says why."""


def account_id(address: str, prefix: int) -> bytes:
    """The 32-byte account id of an ss58 ``address`` of the given network ``prefix``."""
    try:
        decoded = ss58_decode(address)
    except (ValueError, TypeError) as exc:
        raise InvalidKey(f"not a valid ss58 address ({exc})") from None
    try:
        ss58_decode(address, valid_ss58_format=prefix)
    except ValueError:
        raise InvalidKey(
            f"is an ss58 address of another network; this network uses prefix {prefix}"
        ) from None
    raw = bytes.fromhex(decoded)
    if len(raw) != 32:
        raise InvalidKey(f"decodes to {len(raw)} bytes, an account id has 32")
    return raw


def sr25519_public(address: str, prefix: int) -> bytes:
    key = account_id(address, prefix)
    try:
        # A signature with schnorrkel's marker bit set passes signature parsing, so the only
        # thing that can raise is the public key failing to decompress as a Ristretto point.
        sr25519.verify(bytes(63) + b"\x80", b"", key)
    except ValueError:
        raise InvalidKey("is not a valid sr25519 public key (not a Ristretto point)") from None
    if key == bytes(32):
        raise InvalidKey("is the all-zero key, which no one holds the secret of")
    return key


def ed25519_public(address: str, prefix: int) -> bytes:
    key = account_id(address, prefix)
    if not nacl.bindings.crypto_core_ed25519_is_valid_point(key):
        raise InvalidKey(
            "is not a valid ed25519 public key (not a curve point of the main subgroup)"
        )
    return key


def peer_id_from_public(public: bytes) -> str:
    return base58.b58encode(_PEER_ID_PREFIX + public).decode()


def public_from_peer_id(peer_id: str) -> bytes:
    try:
        raw = base58.b58decode(peer_id)
    except ValueError:
        raise InvalidKey("is not base58") from None
    if len(raw) != len(_PEER_ID_PREFIX) + 32 or not raw.startswith(_PEER_ID_PREFIX):
        raise InvalidKey("is not the peer id of an ed25519 node key (12D3KooW…)")
    public = raw[len(_PEER_ID_PREFIX) :]
    if not nacl.bindings.crypto_core_ed25519_is_valid_point(public):
        raise InvalidKey("carries an ed25519 key that is not a valid curve point")
    return public

"""Recipient addresses: an ss58 string -> the 32-byte account id, or the reason it is refused.

Pure: base58, the ``SS58PRE`` blake2b-512 checksum and the prefix, as Substrate's
``sp_core::crypto::Ss58Codec`` checks them, with a reason a person can act on for each failure.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_INDEX = {c: i for i, c in enumerate(_ALPHABET)}
_CHECKSUM_PREFIX = b"SS58PRE"
MAX_ADDRESS_CHARS = 64  # a 32-byte account with a two-byte prefix is 49 characters


class AddressError(ValueError):
    """The address is refused; ``code`` is the machine word, ``str()`` the sentence."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Address:
    text: str
    prefix: int
    account_id: bytes


def _b58decode(text: str) -> bytes:
    num = 0
    for char in text:
        index = _INDEX.get(char)
        if index is None:
            raise AddressError("not_ss58", f"{char!r} is not a base58 character")
        num = num * 58 + index
    body = num.to_bytes((num.bit_length() + 7) // 8, "big") if num else b""
    leading = len(text) - len(text.lstrip("1"))
    return b"\x00" * leading + body


def _b58encode(data: bytes) -> str:
    num = int.from_bytes(data, "big")
    out = ""
    while num:
        num, rem = divmod(num, 58)
        out = _ALPHABET[rem] + out
    return "1" * (len(data) - len(data.lstrip(b"\x00"))) + out


def _checksum(payload: bytes) -> bytes:
    return hashlib.blake2b(_CHECKSUM_PREFIX + payload, digest_size=64).digest()[:2]


def encode(account_id: bytes, prefix: int = 42) -> str:
    if len(account_id) != 32:
        raise ValueError("an account id is 32 bytes")
    if prefix < 64:
        head = bytes([prefix])
    else:  # Substrate's two-byte form for prefixes 64..16383
        head = bytes([((prefix & 0xFC) >> 2) | 0x40, (prefix >> 8) | ((prefix & 0x03) << 6)])
    payload = head + account_id
    return _b58encode(payload + _checksum(payload))


def decode(text: str, expected_prefix: int = 42) -> Address:
    """The account behind ``text``; ``AddressError`` says what is wrong with it."""
    if not text:
        raise AddressError("not_ss58", "the address is empty")
    if text.startswith("0x"):
        raise AddressError("not_ss58", "a hex account id is not accepted; give the ss58 address")
    if len(text) > MAX_ADDRESS_CHARS:
        raise AddressError("not_ss58", f"{len(text)} characters is too long for an ss58 address")
    raw = _b58decode(text)
    if not raw:
        raise AddressError("not_ss58", "the address decodes to nothing")
    if raw[0] & 0x40:
        if len(raw) < 2:
            raise AddressError("not_ss58", "the address is truncated")
        lower = ((raw[0] & 0x3F) << 2) | (raw[1] >> 6)
        prefix, head = lower | ((raw[1] & 0x3F) << 8), 2
    else:
        prefix, head = raw[0], 1
    if len(raw) != head + 32 + 2:
        raise AddressError(
            "not_ss58", f"the address holds {len(raw) - head - 2} bytes; an account id is 32"
        )
    payload, check = raw[:-2], raw[-2:]
    if _checksum(payload) != check:
        raise AddressError("bad_checksum", "the checksum does not match; the address has a typo")
    if prefix != expected_prefix:
        raise AddressError(
            "wrong_network",
            f"the address is for ss58 prefix {prefix}, this network uses {expected_prefix};"
            f" re-encode the same account with prefix {expected_prefix}",
        )
    return Address(text=text, prefix=prefix, account_id=payload[head:])

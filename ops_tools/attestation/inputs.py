"""Validation of request fields; each problem names the field, the value and what is accepted.

Pure: returns the parsed value or raises ``FieldError(field, message)``; the HTTP layer turns
it into a 400.
"""

from __future__ import annotations

import re
import secrets

from scalecodec.utils.ss58 import ss58_decode

OPERATOR_ID_MAX = 64
SS58_PREFIX = 42
_NONCE_RE = re.compile(r"^0x[0-9a-fA-F]{64}$")
_HASH_RE = re.compile(r"^0x[0-9a-fA-F]{64}$")


class FieldError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _shown(value: str, limit: int = 80) -> str:
    return repr(value if len(value) <= limit else value[:limit] + "...")


def operator_id(value: object) -> str:
    """The operator's account name: non-empty, at most 64 characters, printable, no edges of
    white space (it is shown in the explorer and compared byte for byte)."""
    if not isinstance(value, str):
        raise FieldError("operator_id", "must be a string (the operator's account name)")
    if not value:
        raise FieldError("operator_id", "is empty; give the operator's account name")
    if len(value) > OPERATOR_ID_MAX:
        raise FieldError("operator_id", f"{_shown(value)} is {len(value)} characters long;"
                         f" at most {OPERATOR_ID_MAX}")
    if not value.isprintable() or value != value.strip():
        raise FieldError("operator_id", f"{_shown(value)} has control characters or leading or"
                         " trailing spaces; use printable characters only")
    return value


def account(value: object) -> str | None:
    """An ss58 address of the network (prefix 42), or None."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise FieldError("account", "must be a string (an ss58 address, prefix 42)")
    try:
        ss58_decode(value, valid_ss58_format=SS58_PREFIX)
    except ValueError as exc:
        raise FieldError("account", f"{_shown(value)} is not an ss58 address of prefix 42"
                         f" ({exc}); give the address wallet-cli address prints") from None
    return value


def nonce(value: object) -> bytes:
    """32 bytes as 0x and 64 hex digits; a fresh random nonce when absent."""
    if value is None:
        return secrets.token_bytes(32)
    if not isinstance(value, str) or not _NONCE_RE.fullmatch(value):
        shown = _shown(value) if isinstance(value, str) else type(value).__name__
        raise FieldError("nonce", f"{shown} is not 32 bytes as 0x and 64 hex digits;"
                         " give one or leave it out to get a fresh one")
    return bytes.fromhex(value[2:])


def report_hash(value: str, field: str = "hash") -> str:
    if not _HASH_RE.fullmatch(value):
        raise FieldError(field, f"{_shown(value)} is not an H256 (0x and 64 hex digits)")
    return value.lower()


def limit(value: int | None, default: int = 20, maximum: int = 100) -> int:
    if value is None:
        return default
    if not 1 <= value <= maximum:
        raise FieldError("limit", f"{value} is out of range; give 1 to {maximum}")
    return value


def cursor(value: str | None) -> int | None:
    """The opaque cursor of a listing: the position after which the next page starts."""
    if value is None or value == "":
        return None
    if not value.isdigit() or len(value) > 18:
        raise FieldError("cursor", f"{_shown(value)} is not a cursor this service handed out;"
                         " pass next_cursor of the previous page unchanged")
    return int(value)

"""Validation of user input: account names, stake, attestation hash, epoch, timestamp.

Every function returns the parsed value or raises ``InputError`` with one line that names the
option, repeats the value and says what is accepted.
"""

from __future__ import annotations

import re

from ops_tools.errors import InputError

U64_MAX = 2**64 - 1
U128_MAX = 2**128 - 1
ZERO_HASH = "0x" + "00" * 32

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
# Digits with optional "_" group separators, as the interface document writes 1_000_000_000_000.
_UINT_RE = re.compile(r"^[0-9]+(_[0-9]+)*$")
_HEX_RE = re.compile(r"^[0-9a-fA-F]*$")


def account_name(value: str) -> str:
    """A keystore account name: it becomes part of file names, so only safe characters."""
    if not _NAME_RE.fullmatch(value):
        raise InputError(
            f"account name: {value!r} is not allowed; use 1-64 characters from A-Z a-z 0-9 _ -,"
            " starting with a letter or digit"
        )
    return value


def _uint(option: str, value: str, maximum: int, unit: str) -> int:
    text = value.strip()
    if text.startswith("-") and _UINT_RE.fullmatch(text[1:]):
        raise InputError(f"{option}: {value!r} is negative; give a non-negative integer of {unit}")
    if not _UINT_RE.fullmatch(text):
        raise InputError(
            f"{option}: {value!r} is not a non-negative integer; give whole {unit} as digits"
            " ('_' allowed between digits)"
        )
    number = int(text.replace("_", ""))
    if number > maximum:
        raise InputError(f"{option}: {value!r} is larger than the maximum {maximum}")
    return number


def stake_plancks(value: str) -> int:
    """``--stake``: a u128 count of plancks (1 token = 10^12 plancks)."""
    return _uint("--stake", value, U128_MAX, "plancks (1 token = 1_000_000_000_000 plancks)")


def epoch(value: str) -> int:
    """``--epoch``: a u64 epoch number."""
    return _uint("--epoch", value, U64_MAX, "epochs")


def timestamp(value: str) -> int:
    """``--timestamp``: unix seconds as a u64."""
    return _uint("--timestamp", value, U64_MAX, "unix seconds")


def h256(value: str, option: str = "--attestation-hash") -> str:
    """An H256 written as 0x followed by 64 hex digits; returned lower-case."""
    if not value.startswith(("0x", "0X")):
        raise InputError(
            f"{option}: {value!r} lacks the 0x prefix; write the H256 as 0x and 64 hex digits"
        )
    digits = value[2:]
    if not _HEX_RE.fullmatch(digits):
        raise InputError(
            f"{option}: {value!r} has non-hex characters; write the H256 as 0x followed by 64 hex"
            " digits (0-9, a-f)"
        )
    if len(digits) != 64:
        raise InputError(
            f"{option}: {value!r} has {len(digits)} hex digits, an H256 has 64 (32 bytes)"
        )
    return "0x" + digits.lower()

"""The canonical encoding of a report, its hash and what its signature covers (specified in
docs/attestation.md).

    hash      = "0x" + hex(BLAKE2b-256(DOMAIN || JCS(report without "hash" and "signature")))
    signature = ECDSA P-256 / SHA-256 by the attestation key over SIGNED_DOMAIN || hash (32 bytes)

JCS is the JSON Canonicalization Scheme (RFC 8785): object members sorted by key (UTF-16 code
units), no whitespace, strings as UTF-8 with only the mandatory escapes. A report holds no
floating-point numbers (times are strings, amounts are integers), so JCS's number rule reduces
to plain decimal integers; ``canonical_bytes`` refuses floats rather than guess.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

DOMAIN = b"NET-attestation-report-v2\x00"
SIGNED_DOMAIN = b"NET-attestation-report-signature-v2\x00"
# Members outside the hash: the hash itself and the signature over it.
UNHASHED = ("hash", "signature")


def _check(value: Any, path: str) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, str):
        _text(value, path)
        return
    if isinstance(value, int):
        if abs(value) > 2**53 - 1:  # JCS numbers are IEEE doubles: larger ones go as strings
            raise ValueError(f"{path}: integer {value} is outside the exact range of JCS")
        return
    if isinstance(value, float):
        raise ValueError(f"{path}: floats are not allowed in a report")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{path}: object keys must be strings")
            _text(key, path)
            _check(item, f"{path}.{key}")
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check(item, f"{path}[{i}]")
        return
    raise ValueError(f"{path}: {type(value).__name__} is not a JSON value")


def _text(value: str, path: str) -> None:
    # A lone surrogate (JSON "\\ud800") has no UTF-8 form: such a string has no canonical bytes.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{path}: a string holds a lone UTF-16 surrogate") from None


def canonical_bytes(value: Any) -> bytes:
    """RFC 8785 bytes of a JSON value without floats."""
    _check(value, "$")
    # Python's json matches JCS for this subset: ensure_ascii=False leaves non-ASCII as UTF-8,
    # control characters get lowercase \\u00xx escapes, and the key order is sorted by UTF-16
    # code units (the sort key below) rather than by code points.
    return _dump(value).encode("utf-8")


def _dump(value: Any) -> str:
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: kv[0].encode("utf-16-be"))
        return "{" + ",".join(f"{_dump(k)}:{_dump(v)}" for k, v in items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_dump(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def report_hash(report: dict[str, Any]) -> str:
    """Raises ValueError when a value has no canonical form (floats, big integers, lone
    surrogates)."""
    body = {k: v for k, v in report.items() if k not in UNHASHED}
    digest = hashlib.blake2b(DOMAIN + canonical_bytes(body), digest_size=32).digest()
    return "0x" + digest.hex()


def signed_message(hash_hex: str) -> bytes:
    """The bytes the attestation key signs: the domain and the 32 bytes of the report hash."""
    return SIGNED_DOMAIN + bytes.fromhex(hash_hex.removeprefix("0x"))

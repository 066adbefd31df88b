"""The one challenge that binds the CPU quote and every GPU's evidence to a request.

    subject     = account (ss58 text) when the request names one, else operator_id
    report_data = SHA-512(b"NET-attestation-binding-v1\\x00" || UTF-8(subject) || b"\\x00" || nonce)

``report_data`` is the TD report's 64-byte field; the 32-byte nonce itself is the SPDM nonce of
every GPU's measurement request and response. A report copied to another account, or answered
with another nonce, no longer matches either.
"""

from __future__ import annotations

import hashlib

BINDING_DOMAIN = b"NET-attestation-binding-v1\x00"
BINDING_SCHEME = "sha512(\"NET-attestation-binding-v1\" || 0x00 || subject || 0x00 || nonce)"


def subject(operator_id: str, account: str | None) -> str:
    return account if account else operator_id


def report_data(operator_id: str, account: str | None, nonce: bytes) -> bytes:
    if len(nonce) != 32:
        raise ValueError("the nonce is 32 bytes")
    text = subject(operator_id, account).encode("utf-8")
    return hashlib.sha512(BINDING_DOMAIN + text + b"\x00" + nonce).digest()

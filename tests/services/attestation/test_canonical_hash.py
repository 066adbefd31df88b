"""The report hash and signature against an independent implementation of docs/attestation.md
written here: a hand-rolled RFC 8785 serializer (no json module), BLAKE2b-256 with the domain
prefix, and the signature checked with `cryptography` directly, the attestation key read from
the quote at the documented offsets."""

from __future__ import annotations

import base64
import copy
import hashlib

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from ops_tools.attestation.canonical import canonical_bytes, report_hash
from tests.services.attestation.helpers import make_report


def jcs_string(text: str) -> str:
    out = ['"']
    short = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
             "\t": "\\t"}
    for ch in text:
        if ch in short:
            out.append(short[ch])
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def jcs(value) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return jcs_string(value)
    if isinstance(value, list):
        return "[" + ",".join(jcs(v) for v in value) + "]"
    if isinstance(value, dict):
        def utf16_units(key: str) -> list[int]:
            data = key.encode("utf-16-be")
            return [int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2)]
        keys = sorted(value, key=utf16_units)
        return "{" + ",".join(jcs_string(k) + ":" + jcs(value[k]) for k in keys) + "}"
    raise TypeError(type(value))


def independent_hash(report: dict) -> str:
    body = {k: v for k, v in report.items() if k not in ("hash", "signature")}
    data = b"NET-attestation-report-v2\x00" + jcs(body).encode("utf-8")
    return "0x" + hashlib.blake2b(data, digest_size=32).hexdigest()


def independent_signature_holds(report: dict) -> bool:
    """The doc's rule: the attestation key is the quote's bytes 700..763 (x || y of P-256),
    certified by the QE report (bytes 770..1153, its report_data the last 64 bytes) as
    SHA-256(key || QE auth data) || 32 zero bytes; the signature is r || s over
    "NET-attestation-report-signature-v2" 0x00 || the 32 hash bytes, ECDSA with SHA-256."""
    quote = base64.b64decode(report["quote"])
    key_bytes = quote[700:764]
    qe_report_data = quote[770 + 320:770 + 384]
    auth_size = int.from_bytes(quote[1218:1220], "little")
    auth = quote[1220:1220 + auth_size]
    if qe_report_data != hashlib.sha256(key_bytes + auth).digest() + bytes(32):
        return False
    key = ec.EllipticCurvePublicNumbers(int.from_bytes(key_bytes[:32], "big"),
                                        int.from_bytes(key_bytes[32:], "big"),
                                        ec.SECP256R1()).public_key()
    sig = bytes.fromhex(report["signature"][2:])
    der = encode_dss_signature(int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big"))
    message = b"NET-attestation-report-signature-v2\x00" + bytes.fromhex(report["hash"][2:])
    try:
        key.verify(der, message, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return False
    return True


def test_issued_report_hash_matches_the_independent_implementation():
    report = make_report(account="5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY")
    assert report["hash"] == independent_hash(report)
    assert report_hash(report) == report["hash"]


def test_the_signature_checks_out_with_the_independent_implementation():
    report = make_report(account="5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY")
    assert independent_signature_holds(report)
    forged = copy.deepcopy(report)
    forged["expires_at"] = "2099-01-01T00:00:00Z"
    forged["hash"] = independent_hash(forged)
    assert not independent_signature_holds(forged)


def test_awkward_values_encode_the_same():
    # Non-ASCII, control characters, escapes, nesting, and keys whose UTF-16 order differs
    # from their code-point order (U+E000 sorts after U+1F600's surrogate pair in UTF-16).
    value = {
        "z": [1, -2, 0, True, False, None, {"b": "x", "a": "y"}],
        "\ue000": "private use",
        "\U0001f600": "emoji",
        "text": 'quote " backslash \\ tab \t nl \n bell \x07 del \x7f é 中',
        "": "empty key",
        "big": 2**53 - 1,
    }
    assert canonical_bytes(value) == jcs(value).encode("utf-8")
    report = {**value, "hash": "ignored"}
    assert report_hash(report) == independent_hash(report)


def test_the_hash_changes_with_any_field_and_ignores_hash_itself():
    report = make_report()
    assert report_hash({**report, "hash": "0x" + "00" * 32}) == report["hash"]
    assert report_hash({**report, "signature": "0x" + "00" * 64}) == report["hash"]
    assert report_hash({**report, "operator_id": "someone-else"}) != report["hash"]
    assert report_hash({**report, "mock": False}) != report["hash"]


@pytest.mark.parametrize("bad", [1.5, 2**53, {1: "x"}, b"bytes", "\ud800", {"\udc00": 1}])
def test_values_outside_the_encoding_are_refused(bad):
    with pytest.raises(ValueError, match=r"\$"):
        canonical_bytes({"x": bad})

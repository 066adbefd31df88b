"""A report's encodings, shared by the issuer (the attestation service) and the verifier: the
report version, base64 and time stamps as the report writes them, the QE report's binding of the
attestation key, and the decoded views of the quote and of each GPU's evidence. Pure."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
from typing import Any

from ops_tools.attestation import gpu, tdx

REPORT_VERSION = 2


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str) -> dt.datetime:
    moment = dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
    return moment.replace(tzinfo=dt.UTC)


def qe_report_data(attestation_key: bytes, auth_data: bytes) -> bytes:
    """What the QE report carries to certify the attestation key (Intel's rule)."""
    return hashlib.sha256(attestation_key + auth_data).digest() + bytes(32)


def decode_quote(quote: bytes) -> dict[str, Any]:
    parsed = tdx.parse_quote(quote)
    return {"header": parsed.header.to_json(), "td_report": parsed.body.to_json()}


def decode_gpu(index: int, evidence: bytes, nonce: bytes, *, chain_ok: bool,
               signature_ok: bool) -> dict[str, Any]:
    exchange = gpu.parse_report(evidence)
    return {
        "index": index,
        "claims": gpu.claims(exchange, nonce, chain_ok=chain_ok, signature_ok=signature_ok),
        "measurements": {str(i): "0x" + v.hex() for i, v in sorted(exchange.measurements.items())},
        "opaque": dict(exchange.opaque),
    }

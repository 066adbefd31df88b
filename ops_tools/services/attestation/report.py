"""Issuing a mock attestation report: the quote, the GPU evidence, the decoded view, the hash.

Pure: the caller passes the PKI, the time and the nonce; nothing here reads a clock or a file.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from ops_tools.attestation import binding, gpu, tdx
from ops_tools.attestation.canonical import report_hash, signed_message
from ops_tools.attestation.certs import raw_public_key
from ops_tools.attestation.encoding import (
    REPORT_VERSION,
    b64,
    decode_gpu,
    decode_quote,
    iso,
    qe_report_data,
)
from ops_tools.services.attestation.pki import MockPki

# The measurements of the mock TD: fixed, documented values (no real TD was measured).
MOCK_TD_IMAGE = "NET-mock-td-image-v1"
QE_AUTH_DATA = bytes(range(32))
# td_attributes bit 0 is DEBUG: a debuggable TD proves nothing, so the mock one is not.
TD_ATTRIBUTES = bytes(8)
XFAM = (0x00000000000642E7).to_bytes(8, "little")
TEE_TCB_SVN = bytes([0x03, 0x01, 0x02, 0x00]) + bytes(12)


def _sha384(label: str) -> bytes:
    return hashlib.sha384(f"{MOCK_TD_IMAGE}\x00{label}".encode()).digest()


def sign_p256(key: ec.EllipticCurvePrivateKey, data: bytes) -> bytes:
    """Raw r||s (32 bytes each, big-endian), as quotes carry signatures."""
    der = key.sign(data, ec.ECDSA(hashes.SHA256(), deterministic_signing=True))
    r, s = decode_dss_signature(der)
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")


def sign_p384(key: ec.EllipticCurvePrivateKey, data: bytes) -> bytes:
    der = key.sign(data, ec.ECDSA(hashes.SHA384(), deterministic_signing=True))
    r, s = decode_dss_signature(der)
    return r.to_bytes(48, "big") + s.to_bytes(48, "big")


def build_quote(pki: MockPki, report_data: bytes) -> bytes:
    header = tdx.Header()
    body = tdx.TdReportBody(
        {
            "tee_tcb_svn": TEE_TCB_SVN,
            "mr_seam": _sha384("mr_seam"),
            "mr_signer_seam": bytes(48),  # zero for the Intel-signed TDX module; kept as-is
            "seam_attributes": bytes(8),
            "td_attributes": TD_ATTRIBUTES,
            "xfam": XFAM,
            "mr_td": _sha384("mr_td"),
            "mr_config_id": bytes(48),
            "mr_owner": bytes(48),
            "mr_owner_config": bytes(48),
            "rtmr0": _sha384("rtmr0"),
            "rtmr1": _sha384("rtmr1"),
            "rtmr2": _sha384("rtmr2"),
            "rtmr3": bytes(48),
            "report_data": report_data,
        }
    )
    ak = raw_public_key(pki.attestation_key.public_key())
    qe_report = tdx.encode_qe_report(
        {
            "cpu_svn": TEE_TCB_SVN,
            "attributes": bytes([0x11]) + bytes(15),
            "mr_enclave": hashlib.sha256(b"NET-mock-qe-enclave").digest(),
            "mr_signer": hashlib.sha256(b"NET-mock-qe-signer").digest(),
            "isv_prod_id": (2).to_bytes(2, "little"),
            "isv_svn": (4).to_bytes(2, "little"),
            "report_data": qe_report_data(ak, QE_AUTH_DATA),
        }
    )
    signed = header.encode() + body.encode()
    sig = tdx.SignatureData(
        signature=sign_p256(pki.attestation_key, signed),
        attestation_key=ak,
        qe_report=qe_report,
        qe_report_signature=sign_p256(pki.pck_key, qe_report),
        qe_auth_data=QE_AUTH_DATA,
        pck_chain_pem=pki.pck_chain_pem,
    )
    return tdx.Quote(header, body, sig).encode()


def build_gpu_evidence(
    pki: MockPki, index: int, profile: gpu.GpuProfile, nonce: bytes
) -> tuple[bytes, bytes]:
    """(attestation report, certificate chain PEM) of one mock GPU."""
    request = gpu.encode_request(nonce)
    measurements = [
        gpu.golden_measurement(profile, i) for i in range(1, gpu.MEASUREMENT_BLOCKS + 1)
    ]
    response = gpu.encode_response_unsigned(measurements, nonce, gpu.encode_opaque(profile))
    signature = sign_p384(pki.gpu_key(index), request + response)
    return request + response + signature, pki.gpu_chain_pem(index)


@dataclass(frozen=True)
class IssueRequest:
    operator_id: str
    account: str | None
    nonce: bytes
    genesis_hash: str
    issued_at: dt.datetime
    ttl: dt.timedelta
    gpus: list[gpu.GpuProfile] = field(default_factory=lambda: [gpu.GpuProfile()])


def issue(pki: MockPki, req: IssueRequest) -> dict[str, Any]:
    """A complete report, ``hash`` and ``signature`` included: the attestation key (certified
    by the quote's QE report, whose PCK chain ends at the mock root) signs the hash, which covers
    every other member, so no field can be edited without the key."""
    data = binding.report_data(req.operator_id, req.account, req.nonce)
    quote = build_quote(pki, data)
    evidence = []
    decoded_gpus = []
    for index, profile in enumerate(req.gpus):
        report, chain = build_gpu_evidence(pki, index, profile, req.nonce)
        evidence.append({"index": index, "evidence": b64(report), "certificate": b64(chain)})
        # Issued from this service's own keys: the chain and the signature hold by construction;
        # the verifier recomputes both from the bytes.
        decoded_gpus.append(decode_gpu(index, report, req.nonce, chain_ok=True, signature_ok=True))
    issued = req.issued_at.replace(microsecond=0)
    report: dict[str, Any] = {
        "version": REPORT_VERSION,
        "operator_id": req.operator_id,
        "account": req.account,
        "nonce": "0x" + req.nonce.hex(),
        "issued_at": iso(issued),
        "expires_at": iso(issued + req.ttl),
        "mock": True,
        "genesis_hash": req.genesis_hash,
        "binding": binding.BINDING_SCHEME,
        "measurements": {"tdx": decode_quote(quote), "gpus": decoded_gpus},
        "quote": b64(quote),
        "gpu_evidence": evidence,
    }
    report["hash"] = report_hash(report)
    report["signature"] = "0x" + sign_p256(pki.attestation_key,
                                           signed_message(report["hash"])).hex()
    return report

"""GPU evidence read at the SPDM 1.1 offsets written here, and its one-nonce binding."""

from __future__ import annotations

import base64
import struct

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from tests.services.attestation.helpers import make_report, pki


def test_every_gpu_carries_the_report_nonce_in_a_signed_spdm_exchange():
    nonce = bytes(range(100, 132))
    report = make_report(nonce=nonce, gpus=3)
    assert [e["index"] for e in report["gpu_evidence"]] == [0, 1, 2]
    for item in report["gpu_evidence"]:
        raw = base64.b64decode(item["evidence"])
        req, resp = raw[:37], raw[37:]
        assert req[:4] == bytes([0x11, 0xE0, 0x01, 0xFF]) and req[4:36] == nonce
        assert resp[:2] == bytes([0x11, 0x60])
        blocks = resp[4]
        record_len = int.from_bytes(resp[5:8], "little")
        pos = 8 + record_len
        assert resp[pos:pos + 32] == nonce
        (opaque_len,) = struct.unpack_from("<H", resp, pos + 32)
        signature = resp[pos + 34 + opaque_len:]
        assert len(signature) == 96 and blocks == 8
        certs = x509.load_pem_x509_certificates(base64.b64decode(item["certificate"]))
        assert certs[-1] == pki().root
        der = encode_dss_signature(int.from_bytes(signature[:48], "big"),
                                   int.from_bytes(signature[48:], "big"))
        certs[0].public_key().verify(der, raw[:-96], ec.ECDSA(hashes.SHA384()))
    for view in report["measurements"]["gpus"]:
        claims = view["claims"]
        assert claims["x-nvidia-gpu-attestation-report-nonce-match"] is True
        assert claims["measres"] == "comparison-successful"
        assert claims["secboot"] is True and claims["dbgstat"] == "disabled"
        assert claims["hwmodel"] and claims["x-nvidia-gpu-driver-version"]
        assert claims["x-nvidia-gpu-vbios-version"]

"""The quote read by a parser written here from Intel's public TDX v4 layout (offsets, sizes),
independent of ops_tools.attestation.tdx, and its signatures checked by hand."""

from __future__ import annotations

import base64
import hashlib
import itertools
import struct

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from tests.services.attestation.helpers import make_report, pki

# TD report body fields at their absolute offsets in the quote (header is bytes 0..47).
BODY = {
    "tee_tcb_svn": (48, 16), "mr_seam": (64, 48), "mr_signer_seam": (112, 48),
    "seam_attributes": (160, 8), "td_attributes": (168, 8), "xfam": (176, 8),
    "mr_td": (184, 48), "mr_config_id": (232, 48), "mr_owner": (280, 48),
    "mr_owner_config": (328, 48), "rtmr0": (376, 48), "rtmr1": (424, 48), "rtmr2": (472, 48),
    "rtmr3": (520, 48), "report_data": (568, 64),
}


def parse(quote: bytes) -> dict:
    version, key_type, tee_type, _qe_svn, _pce_svn = struct.unpack_from("<HHIHH", quote, 0)
    out = {"version": version, "att_key_type": key_type, "tee_type": tee_type,
           "qe_vendor_id": quote[12:28], "user_data": quote[28:48]}
    out.update({name: quote[off:off + size] for name, (off, size) in BODY.items()})
    (sig_len,) = struct.unpack_from("<I", quote, 632)
    assert len(quote) == 636 + sig_len
    sig = quote[636:]
    out["signature"], out["attestation_key"] = sig[0:64], sig[64:128]
    cert_type, cert_size = struct.unpack_from("<HI", sig, 128)
    out["cert_type"] = cert_type
    cert = sig[134:134 + cert_size]
    assert len(cert) == cert_size == len(sig) - 134
    out["qe_report"], out["qe_report_signature"] = cert[0:384], cert[384:448]
    (auth_len,) = struct.unpack_from("<H", cert, 448)
    out["qe_auth_data"] = cert[450:450 + auth_len]
    pos = 450 + auth_len
    inner_type, inner_size = struct.unpack_from("<HI", cert, pos)
    out["pck_type"], out["pck_chain"] = inner_type, cert[pos + 6:pos + 6 + inner_size]
    assert pos + 6 + inner_size == len(cert)
    return out


def ecdsa_ok(key: ec.EllipticCurvePublicKey, raw_sig: bytes, data: bytes) -> bool:
    der = encode_dss_signature(int.from_bytes(raw_sig[:32], "big"),
                               int.from_bytes(raw_sig[32:], "big"))
    key.verify(der, data, ec.ECDSA(hashes.SHA256()))
    return True


def test_quote_is_tdx_v4_by_the_public_layout():
    nonce = bytes(range(32))
    report = make_report(operator_id="op-7", account=None, nonce=nonce)
    quote = base64.b64decode(report["quote"])
    q = parse(quote)
    assert (q["version"], q["att_key_type"], q["tee_type"]) == (4, 2, 0x81)
    assert q["cert_type"] == 6 and q["pck_type"] == 5
    # report_data is the documented binding (docs/attestation.md), recomputed here.
    want = hashlib.sha512(b"NET-attestation-binding-v1\x00" + b"op-7" + b"\x00" + nonce).digest()
    assert q["report_data"] == want
    # The decoded view carries the same bytes under the same names.
    body = report["measurements"]["tdx"]["td_report"]
    for name in BODY:
        assert body[name] == "0x" + q[name].hex(), name
    assert report["measurements"]["tdx"]["header"]["qe_vendor_id"] == "0x" + q["qe_vendor_id"].hex()


def test_signatures_chain_up_to_the_published_mock_root():
    report = make_report(account="5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY")
    q = parse(base64.b64decode(report["quote"]))
    quote = base64.b64decode(report["quote"])
    ak = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(),
                                                      b"\x04" + q["attestation_key"])
    assert ecdsa_ok(ak, q["signature"], quote[:632])
    # QE report data (offset 320 of the SGX report body) certifies the attestation key.
    assert q["qe_report"][320:352] == hashlib.sha256(q["attestation_key"]
                                                     + q["qe_auth_data"]).digest()
    assert q["qe_report"][352:384] == bytes(32)
    certs = x509.load_pem_x509_certificates(q["pck_chain"])
    assert ecdsa_ok(certs[0].public_key(), q["qe_report_signature"], q["qe_report"])
    for child, parent in itertools.pairwise(certs):
        child.verify_directly_issued_by(parent)
    assert certs[-1] == pki().root
    cn = certs[-1].subject.rfc4514_string()
    assert "MOCK" in cn and "Intel" not in cn


def test_report_data_binds_the_account_when_given():
    nonce = b"\x11" * 32
    account = "5FHneW46xGXgs5mUiveU4sbTyGBzmstUspZC92UhjJM694ty"
    q = parse(base64.b64decode(make_report(operator_id="bob", account=account,
                                           nonce=nonce)["quote"]))
    want = hashlib.sha512(b"NET-attestation-binding-v1\x00" + account.encode() + b"\x00"
                          + nonce).digest()
    assert q["report_data"] == want


def test_same_seed_same_root_other_seed_other_root():
    from ops_tools.services.attestation.pki import MockPki

    again = MockPki(b"test-seed-of-the-mock-root-0123456789")
    assert again.root.public_bytes(_pem()) == pki().root.public_bytes(_pem())
    other = MockPki(b"another-seed-entirely-0123456789")
    assert other.root.public_key() != pki().root.public_key()


def _pem():
    from cryptography.hazmat.primitives.serialization import Encoding

    return Encoding.PEM

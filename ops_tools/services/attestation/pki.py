"""The mock PKI of one deployment, derived from its seed secret.

Every key is derived from the seed (HKDF-SHA256, one label per key) and every certificate is
signed with deterministic ECDSA (RFC 6979), so the same seed gives the same root certificate
byte for byte after a restart: reports issued before it still verify, and ``GET /v1/roots``
does not change under anyone's feet.

    NET MOCK Attestation Root CA (P-256, self-signed)           <- the only trust anchor
    ├── NET MOCK PCK Platform CA (P-256)
    │   └── NET MOCK PCK Certificate (P-256)   signs the quoting enclave's report
    └── NET MOCK GPU Device Identity CA (P-256)
        └── NET MOCK GPU Device <i> (P-384)    signs the SPDM measurements of GPU <i>

Every subject says MOCK; none names Intel or NVIDIA as issuer. The quote's attestation key is
derived the same way (it is certified by the QE report, not by a certificate).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from functools import cached_property

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.x509.oid import NameOID

from ops_tools.attestation.certs import fingerprint, pem_chain

ORG = "NET test network (MOCK attestation, not hardware-backed)"
ROOT_CN = "NET MOCK Attestation Root CA"
MIN_SEED_BYTES = 16
# Fixed validity: the certificates are a function of the seed alone, not of the issue time.
NOT_BEFORE = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
NOT_AFTER = dt.datetime(2049, 12, 31, 23, 59, 59, tzinfo=dt.UTC)


def _name(cn: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORG),
        ]
    )


def derive_key(seed: bytes, label: str, curve: ec.EllipticCurve) -> ec.EllipticCurvePrivateKey:
    """A private key from the seed and a label; a scalar in [1, n-1] by reduction."""
    order = {
        "secp256r1": 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551,
        "secp384r1": int(
            "ffffffffffffffffffffffffffffffffffffffffffffffffc7634d81f4372ddf"
            "581a0db248b0a77aecec196accc52973",
            16,
        ),
    }[curve.name]
    okm = HKDF(
        algorithm=hashes.SHA256(),
        length=curve.key_size // 8 + 16,  # 128 extra bits make the reduction bias negligible
        salt=b"NET-mock-attestation-pki-v1",
        info=label.encode(),
    ).derive(seed)
    scalar = int.from_bytes(okm, "big") % (order - 1) + 1
    return ec.derive_private_key(scalar, curve)


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Certificate | None,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool,
    path_length: int | None = None,
) -> x509.Certificate:
    public = key.public_key()
    spki = public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    serial = int.from_bytes(hashlib.sha256(spki).digest()[:16], "big") >> 1 or 1
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer.subject if issuer is not None else _name(subject))
        .public_key(public)
        .serial_number(serial)
        .not_valid_before(NOT_BEFORE)
        .not_valid_after(NOT_AFTER)
        .add_extension(
            x509.BasicConstraints(ca=ca, path_length=path_length if ca else None), critical=True
        )
        .add_extension(
            x509.KeyUsage(
                digital_signature=not ca,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=ca,
                crl_sign=ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
    )
    if issuer is not None:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
            critical=False,
        )
    return builder.sign(issuer_key, hashes.SHA256(), ecdsa_deterministic=True)


@dataclass
class MockPki:
    seed: bytes

    def __post_init__(self) -> None:
        self._gpu_chains: dict[int, bytes] = {}
        if len(self.seed) < MIN_SEED_BYTES:
            raise ValueError(f"the mock root seed needs at least {MIN_SEED_BYTES} bytes")

    def __repr__(self) -> str:  # the seed is a secret: never in a log line or a traceback
        return f"MockPki(root={fingerprint(self.root)})"

    @cached_property
    def root_key(self) -> ec.EllipticCurvePrivateKey:
        return derive_key(self.seed, "root", ec.SECP256R1())

    @cached_property
    def root(self) -> x509.Certificate:
        return _certificate(ROOT_CN, self.root_key, None, self.root_key, ca=True, path_length=1)

    @cached_property
    def pck_ca_key(self) -> ec.EllipticCurvePrivateKey:
        return derive_key(self.seed, "pck-platform-ca", ec.SECP256R1())

    @cached_property
    def pck_ca(self) -> x509.Certificate:
        return _certificate(
            "NET MOCK PCK Platform CA",
            self.pck_ca_key,
            self.root,
            self.root_key,
            ca=True,
            path_length=0,
        )

    @cached_property
    def pck_key(self) -> ec.EllipticCurvePrivateKey:
        return derive_key(self.seed, "pck", ec.SECP256R1())

    @cached_property
    def pck(self) -> x509.Certificate:
        return _certificate(
            "NET MOCK PCK Certificate", self.pck_key, self.pck_ca, self.pck_ca_key, ca=False
        )

    @cached_property
    def pck_chain_pem(self) -> bytes:
        return pem_chain([self.pck, self.pck_ca, self.root])

    @cached_property
    def attestation_key(self) -> ec.EllipticCurvePrivateKey:
        return derive_key(self.seed, "quote-attestation-key", ec.SECP256R1())

    @cached_property
    def gpu_ca_key(self) -> ec.EllipticCurvePrivateKey:
        return derive_key(self.seed, "gpu-device-identity-ca", ec.SECP256R1())

    @cached_property
    def gpu_ca(self) -> x509.Certificate:
        return _certificate(
            "NET MOCK GPU Device Identity CA",
            self.gpu_ca_key,
            self.root,
            self.root_key,
            ca=True,
            path_length=0,
        )

    def gpu_key(self, index: int) -> ec.EllipticCurvePrivateKey:
        return derive_key(self.seed, f"gpu-device/{index}", ec.SECP384R1())

    def gpu_chain_pem(self, index: int) -> bytes:
        cached = self._gpu_chains.get(index)
        if cached is not None:
            return cached
        leaf = _certificate(
            f"NET MOCK GPU Device {index}",
            self.gpu_key(index),
            self.gpu_ca,
            self.gpu_ca_key,
            ca=False,
        )
        chain = self._gpu_chains[index] = pem_chain([leaf, self.gpu_ca, self.root])
        return chain

    def roots_json(self) -> list[dict[str, object]]:
        return [
            {
                "name": ROOT_CN,
                "mock": True,
                "fingerprint": fingerprint(self.root),
                "pem": self.root.public_bytes(serialization.Encoding.PEM).decode(),
            }
        ]

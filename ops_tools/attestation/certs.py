"""Certificate and key helpers that the verifier and the mock PKI share: the attestation key
as TDX quotes carry it (raw x||y), PEM chains, fingerprints. Pure: no I/O, no secrets."""

from __future__ import annotations

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec


def raw_public_key(key: ec.EllipticCurvePublicKey) -> bytes:
    """x||y without the 0x04 prefix, as TDX quotes carry the attestation key."""
    point = key.public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    return point[1:]


def public_key_from_raw(raw: bytes) -> ec.EllipticCurvePublicKey:
    return ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), b"\x04" + raw)


def pem_chain(certs: list[x509.Certificate]) -> bytes:
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)


def fingerprint(cert: x509.Certificate) -> str:
    return "sha256:" + cert.fingerprint(hashes.SHA256()).hex()

"""The byte layout of an Intel TDX quote, version 4 (ECDSA P-256 attestation key).

Offsets and sizes follow Intel's public "TDX DCAP Quoting Library API" (quote format v4):

    header            48 bytes   version u16, att_key_type u16, tee_type u32, qe_svn u16,
                                 pce_svn u16, qe_vendor_id 16, user_data 20
    TD report body   584 bytes   see ``TD_BODY_FIELDS``
    signature length   4 bytes   u32, the size of the signature data that follows
    signature data               ECDSA signature (r||s, 64), attestation key (x||y, 64),
                                 certification data (type u16 = 6, size u32, then:
                                   QE report 384, QE report signature 64,
                                   QE auth data (size u16, bytes),
                                   certification data (type u16 = 5, size u32, PCK chain PEM))

All integers are little-endian. Nothing here does I/O or cryptography: it only builds and
splits bytes, so the verifier and the explorer read the same layout.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

QUOTE_VERSION = 4
ATT_KEY_TYPE_ECDSA_P256 = 2
TEE_TYPE_TDX = 0x81
HEADER_SIZE = 48
TD_BODY_SIZE = 584
QE_REPORT_SIZE = 384
CERT_TYPE_QE_REPORT = 6
CERT_TYPE_PCK_CHAIN = 5
# Not Intel's QE vendor id (939a7233-f79c-4ca9-940a-0db3957f0607): these quotes come from no
# Intel quoting enclave, and a tool that knows the real id must not take them for real ones.
MOCK_QE_VENDOR_ID = bytes.fromhex("4e45544d4f434b5145000000000000a1")

TD_BODY_FIELDS: tuple[tuple[str, int], ...] = (
    ("tee_tcb_svn", 16),
    ("mr_seam", 48),
    ("mr_signer_seam", 48),
    ("seam_attributes", 8),
    ("td_attributes", 8),
    ("xfam", 8),
    ("mr_td", 48),
    ("mr_config_id", 48),
    ("mr_owner", 48),
    ("mr_owner_config", 48),
    ("rtmr0", 48),
    ("rtmr1", 48),
    ("rtmr2", 48),
    ("rtmr3", 48),
    ("report_data", 64),
)
# The SGX report body of the quoting enclave (its own report, signed by the PCK key).
QE_REPORT_FIELDS: tuple[tuple[str, int], ...] = (
    ("cpu_svn", 16),
    ("misc_select", 4),
    ("reserved1", 28),
    ("attributes", 16),
    ("mr_enclave", 32),
    ("reserved2", 32),
    ("mr_signer", 32),
    ("reserved3", 96),
    ("isv_prod_id", 2),
    ("isv_svn", 2),
    ("reserved4", 60),
    ("report_data", 64),
)
assert sum(size for _, size in TD_BODY_FIELDS) == TD_BODY_SIZE
assert sum(size for _, size in QE_REPORT_FIELDS) == QE_REPORT_SIZE


class QuoteFormatError(ValueError):
    """The bytes are not a TDX v4 quote of the expected shape; the message says where."""


@dataclass(frozen=True)
class Header:
    version: int = QUOTE_VERSION
    att_key_type: int = ATT_KEY_TYPE_ECDSA_P256
    tee_type: int = TEE_TYPE_TDX
    qe_svn: int = 0
    pce_svn: int = 0
    qe_vendor_id: bytes = MOCK_QE_VENDOR_ID
    user_data: bytes = bytes(20)

    def encode(self) -> bytes:
        if len(self.qe_vendor_id) != 16 or len(self.user_data) != 20:
            raise ValueError("qe_vendor_id is 16 bytes and user_data 20")
        return struct.pack(
            "<HHIHH16s20s",
            self.version,
            self.att_key_type,
            self.tee_type,
            self.qe_svn,
            self.pce_svn,
            self.qe_vendor_id,
            self.user_data,
        )

    @classmethod
    def decode(cls, data: bytes) -> Header:
        if len(data) != HEADER_SIZE:
            raise QuoteFormatError(f"header: {len(data)} bytes, expected {HEADER_SIZE}")
        fields = struct.unpack("<HHIHH16s20s", data)
        return cls(*fields)

    def to_json(self) -> dict[str, object]:
        return {
            "version": self.version,
            "att_key_type": self.att_key_type,
            "tee_type": f"0x{self.tee_type:08x}",
            "qe_svn": self.qe_svn,
            "pce_svn": self.pce_svn,
            "qe_vendor_id": "0x" + self.qe_vendor_id.hex(),
            "user_data": "0x" + self.user_data.hex(),
        }


def _encode_fields(spec: tuple[tuple[str, int], ...], values: dict[str, bytes], what: str) -> bytes:
    out = bytearray()
    for name, size in spec:
        value = values.get(name, bytes(size))
        if len(value) != size:
            raise ValueError(f"{what}.{name}: {len(value)} bytes, expected {size}")
        out += value
    return bytes(out)


def _decode_fields(spec: tuple[tuple[str, int], ...], data: bytes) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    offset = 0
    for name, size in spec:
        out[name] = data[offset : offset + size]
        offset += size
    return out


@dataclass(frozen=True)
class TdReportBody:
    """The TD report body (TDX 1.0, 584 bytes): measurements and the 64-byte report data."""

    values: dict[str, bytes]

    def encode(self) -> bytes:
        return _encode_fields(TD_BODY_FIELDS, self.values, "td_report")

    @classmethod
    def decode(cls, data: bytes) -> TdReportBody:
        if len(data) != TD_BODY_SIZE:
            raise QuoteFormatError(f"td report body: {len(data)} bytes, expected {TD_BODY_SIZE}")
        return cls(_decode_fields(TD_BODY_FIELDS, data))

    def to_json(self) -> dict[str, str]:
        return {name: "0x" + self.values[name].hex() for name, _ in TD_BODY_FIELDS}


def encode_qe_report(values: dict[str, bytes]) -> bytes:
    return _encode_fields(QE_REPORT_FIELDS, values, "qe_report")


def decode_qe_report(data: bytes) -> dict[str, bytes]:
    if len(data) != QE_REPORT_SIZE:
        raise QuoteFormatError(f"qe report: {len(data)} bytes, expected {QE_REPORT_SIZE}")
    return _decode_fields(QE_REPORT_FIELDS, data)


@dataclass(frozen=True)
class SignatureData:
    signature: bytes  # r||s, 32 bytes each, big-endian (as Intel writes them)
    attestation_key: bytes  # uncompressed point without the 0x04 prefix: x||y
    qe_report: bytes
    qe_report_signature: bytes
    qe_auth_data: bytes
    pck_chain_pem: bytes

    def encode(self) -> bytes:
        if len(self.signature) != 64 or len(self.attestation_key) != 64:
            raise ValueError("signature and attestation key are 64 bytes each")
        if len(self.qe_report) != QE_REPORT_SIZE or len(self.qe_report_signature) != 64:
            raise ValueError("qe report is 384 bytes and its signature 64")
        inner = struct.pack("<HI", CERT_TYPE_PCK_CHAIN, len(self.pck_chain_pem))
        inner += self.pck_chain_pem
        qe_block = (
            self.qe_report
            + self.qe_report_signature
            + struct.pack("<H", len(self.qe_auth_data))
            + self.qe_auth_data
            + inner
        )
        return (
            self.signature
            + self.attestation_key
            + struct.pack("<HI", CERT_TYPE_QE_REPORT, len(qe_block))
            + qe_block
        )

    @classmethod
    def decode(cls, data: bytes) -> SignatureData:
        reader = _Reader(data, "signature data")
        signature = reader.take(64, "ecdsa signature")
        key = reader.take(64, "attestation key")
        cert_type = reader.u16("certification data type")
        if cert_type != CERT_TYPE_QE_REPORT:
            raise QuoteFormatError(
                f"certification data type {cert_type}, expected {CERT_TYPE_QE_REPORT}"
                " (QE report certification data)"
            )
        size = reader.u32("certification data size")
        block = _Reader(reader.take(size, "certification data"), "qe certification data")
        reader.end()
        qe_report = block.take(QE_REPORT_SIZE, "qe report")
        qe_sig = block.take(64, "qe report signature")
        auth = block.take(block.u16("qe auth data size"), "qe auth data")
        inner_type = block.u16("pck certification data type")
        if inner_type != CERT_TYPE_PCK_CHAIN:
            raise QuoteFormatError(
                f"pck certification data type {inner_type}, expected {CERT_TYPE_PCK_CHAIN}"
                " (PCK certificate chain)"
            )
        pem = block.take(block.u32("pck certification data size"), "pck certificate chain")
        block.end()
        return cls(signature, key, qe_report, qe_sig, auth, pem)


@dataclass(frozen=True)
class Quote:
    header: Header
    body: TdReportBody
    signature_data: SignatureData = field(compare=False)

    def signed_bytes(self) -> bytes:
        """What the attestation key signs: the header and the TD report body."""
        return self.header.encode() + self.body.encode()

    def encode(self) -> bytes:
        sig = self.signature_data.encode()
        return self.signed_bytes() + struct.pack("<I", len(sig)) + sig


def parse_quote(data: bytes) -> Quote:
    """Split a quote into its parts; raises ``QuoteFormatError`` naming the first bad part."""
    reader = _Reader(data, "quote")
    header = Header.decode(reader.take(HEADER_SIZE, "header"))
    if header.version != QUOTE_VERSION:
        raise QuoteFormatError(f"header.version is {header.version}, expected {QUOTE_VERSION}")
    if header.att_key_type != ATT_KEY_TYPE_ECDSA_P256:
        raise QuoteFormatError(
            f"header.att_key_type is {header.att_key_type}, expected 2 (ECDSA-256 with P-256)"
        )
    if header.tee_type != TEE_TYPE_TDX:
        raise QuoteFormatError(f"header.tee_type is 0x{header.tee_type:x}, expected 0x81 (TDX)")
    body = TdReportBody.decode(reader.take(TD_BODY_SIZE, "td report body"))
    size = reader.u32("signature data length")
    sig = SignatureData.decode(reader.take(size, "signature data"))
    reader.end()
    return Quote(header, body, sig)


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.pos, self.what = data, 0, what

    def take(self, size: int, name: str) -> bytes:
        if self.pos + size > len(self.data):
            raise QuoteFormatError(
                f"{self.what}: {name} needs {size} bytes at offset {self.pos},"
                f" only {len(self.data) - self.pos} left"
            )
        out = self.data[self.pos : self.pos + size]
        self.pos += size
        return out

    def u16(self, name: str) -> int:
        return int(struct.unpack("<H", self.take(2, name))[0])

    def u32(self, name: str) -> int:
        return int(struct.unpack("<I", self.take(4, name))[0])

    def end(self) -> None:
        if self.pos != len(self.data):
            raise QuoteFormatError(
                f"{self.what}: {len(self.data) - self.pos} unexpected bytes after offset {self.pos}"
            )

"""GPU evidence shaped like NVIDIA's confidential-computing evidence (mock).

For each GPU, NVIDIA's tooling hands a verifier two things: the attestation report, which is
the SPDM 1.1 GET_MEASUREMENTS request followed by its MEASUREMENTS response (signed by the
device key, ECDSA P-384 / SHA-384), and the device certificate chain (PEM, leaf first). That
is what this module builds and splits.

    request  (37 bytes): version 0x11, code 0xE0, param1 0x01 (signature requested),
                         param2 0xFF (all measurements), nonce 32, slot id 0
    response:            version 0x11, code 0x60, param1 0, param2 slot id 0,
                         number of blocks u8, record length u24,
                         measurement record (blocks: index u8, spec 0x01, size u16,
                                             value type u8, value size u16, value),
                         nonce 32, opaque length u16, opaque data, signature 96 (r||s)

The opaque data is a list of TLVs (type u16, length u16, value), the project's own numbering
(``OPAQUE_*``): driver version, VBIOS version, hardware model, secure boot, debug status.
Reference ("golden") measurements stand in for NVIDIA's RIMs: a documented function of the
hardware model, VBIOS version and block index (``golden_measurement``).
All integers little-endian.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

SPDM_VERSION = 0x11
GET_MEASUREMENTS = 0xE0
MEASUREMENTS = 0x60
REQUEST_SIZE = 37
NONCE_SIZE = 32
SIGNATURE_SIZE = 96
DIGEST_SIZE = 48
MEASUREMENT_BLOCKS = 8

OPAQUE_DRIVER_VERSION = 1
OPAQUE_VBIOS_VERSION = 2
OPAQUE_HW_MODEL = 3
OPAQUE_SECURE_BOOT = 4
OPAQUE_DEBUG_STATUS = 5
OPAQUE_NAMES = {
    OPAQUE_DRIVER_VERSION: "driver_version",
    OPAQUE_VBIOS_VERSION: "vbios_version",
    OPAQUE_HW_MODEL: "hwmodel",
    OPAQUE_SECURE_BOOT: "secure_boot",
    OPAQUE_DEBUG_STATUS: "debug_status",
}


class EvidenceFormatError(ValueError):
    """The bytes are not an SPDM measurement exchange of the expected shape."""


@dataclass(frozen=True)
class GpuProfile:
    """What the mock GPU says it is (as NVIDIA's H100 in CC mode reports itself)."""

    hwmodel: str = "GH100 A01 GSP BROM"
    driver_version: str = "550.90.07"
    vbios_version: str = "96.00.9F.00.04"


def golden_measurement(profile: GpuProfile, index: int) -> bytes:
    """The reference value of measurement block ``index`` (stands in for a RIM entry)."""
    text = f"NET-mock-gpu-rim-v1\x00{profile.hwmodel}\x00{profile.vbios_version}\x00{index}"
    return hashlib.sha384(text.encode()).digest()


def encode_request(nonce: bytes) -> bytes:
    if len(nonce) != NONCE_SIZE:
        raise ValueError("the SPDM nonce is 32 bytes")
    return bytes([SPDM_VERSION, GET_MEASUREMENTS, 0x01, 0xFF]) + nonce + b"\x00"


def _tlv(kind: int, value: bytes) -> bytes:
    return struct.pack("<HH", kind, len(value)) + value


def encode_opaque(profile: GpuProfile, *, secure_boot: bool = True, debug: bool = False) -> bytes:
    return (
        _tlv(OPAQUE_DRIVER_VERSION, profile.driver_version.encode())
        + _tlv(OPAQUE_VBIOS_VERSION, profile.vbios_version.encode())
        + _tlv(OPAQUE_HW_MODEL, profile.hwmodel.encode())
        + _tlv(OPAQUE_SECURE_BOOT, bytes([1 if secure_boot else 0]))
        + _tlv(OPAQUE_DEBUG_STATUS, bytes([1 if debug else 0]))
    )


def encode_response_unsigned(measurements: list[bytes], nonce: bytes, opaque: bytes) -> bytes:
    record = bytearray()
    for index, value in enumerate(measurements, start=1):
        # DMTF measurement: value type 0x01 (mutable firmware digest), then the digest.
        dmtf = struct.pack("<BH", 0x01, len(value)) + value
        record += struct.pack("<BBH", index, 0x01, len(dmtf)) + dmtf
    return (
        bytes([SPDM_VERSION, MEASUREMENTS, 0x00, 0x00, len(measurements)])
        + len(record).to_bytes(3, "little")
        + bytes(record)
        + nonce
        + struct.pack("<H", len(opaque))
        + opaque
    )


@dataclass(frozen=True)
class SpdmExchange:
    request: bytes
    request_nonce: bytes
    response_unsigned: bytes
    measurements: dict[int, bytes]
    response_nonce: bytes
    opaque: dict[str, str | int]
    signature: bytes

    @property
    def signed_bytes(self) -> bytes:
        """What the device key signs: the request and the response up to the signature."""
        return self.request + self.response_unsigned


def parse_report(data: bytes) -> SpdmExchange:
    """Split request and response; raises ``EvidenceFormatError`` naming the bad part."""
    if len(data) < REQUEST_SIZE + 8 + NONCE_SIZE + 2 + SIGNATURE_SIZE:
        raise EvidenceFormatError(f"attestation report: {len(data)} bytes is too short")
    request = data[:REQUEST_SIZE]
    if request[:4] != bytes([SPDM_VERSION, GET_MEASUREMENTS, 0x01, 0xFF]) or request[36] != 0:
        raise EvidenceFormatError(
            "request: not an SPDM 1.1 GET_MEASUREMENTS (all, signed, slot 0) request"
        )
    response = data[REQUEST_SIZE:]
    if response[:4] != bytes([SPDM_VERSION, MEASUREMENTS, 0, 0]):
        raise EvidenceFormatError("response: not an SPDM 1.1 MEASUREMENTS response")
    count = response[4]
    record_len = int.from_bytes(response[5:8], "little")
    pos = 8
    record = response[pos : pos + record_len]
    if len(record) != record_len:
        raise EvidenceFormatError("response: measurement record shorter than its length")
    measurements: dict[int, bytes] = {}
    rpos = 0
    for _ in range(count):
        if rpos + 4 > len(record):
            raise EvidenceFormatError("response: measurement block header past the record")
        index, spec, size = struct.unpack("<BBH", record[rpos : rpos + 4])
        block = record[rpos + 4 : rpos + 4 + size]
        if spec != 0x01 or len(block) != size or size < 3:
            raise EvidenceFormatError(f"response: measurement block {index} is malformed")
        vtype, vsize = struct.unpack("<BH", block[:3])
        if vtype != 0x01 or vsize != size - 3 or index in measurements:
            raise EvidenceFormatError(f"response: measurement block {index} is malformed")
        measurements[index] = block[3:]
        rpos += 4 + size
    if rpos != record_len:
        raise EvidenceFormatError("response: bytes left over in the measurement record")
    pos += record_len
    nonce = response[pos : pos + NONCE_SIZE]
    pos += NONCE_SIZE
    if pos + 2 > len(response):
        raise EvidenceFormatError("response: truncated before the opaque data")
    (opaque_len,) = struct.unpack("<H", response[pos : pos + 2])
    pos += 2
    opaque_bytes = response[pos : pos + opaque_len]
    pos += opaque_len
    signature = response[pos:]
    if len(opaque_bytes) != opaque_len or len(signature) != SIGNATURE_SIZE:
        raise EvidenceFormatError(
            f"response: expected opaque data of {opaque_len} bytes then a {SIGNATURE_SIZE}-byte"
            f" signature, found {len(response) - (pos - opaque_len)} bytes"
        )
    return SpdmExchange(
        request=request,
        request_nonce=request[4:36],
        response_unsigned=response[:pos],
        measurements=measurements,
        response_nonce=nonce,
        opaque=parse_opaque(opaque_bytes),
        signature=signature,
    )


def parse_opaque(data: bytes) -> dict[str, str | int]:
    out: dict[str, str | int] = {}
    pos = 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise EvidenceFormatError("opaque data: truncated TLV header")
        kind, size = struct.unpack("<HH", data[pos : pos + 4])
        value = data[pos + 4 : pos + 4 + size]
        name = OPAQUE_NAMES.get(kind)
        if len(value) != size or name is None or name in out:
            raise EvidenceFormatError(f"opaque data: bad TLV of type {kind} at offset {pos}")
        if kind in (OPAQUE_SECURE_BOOT, OPAQUE_DEBUG_STATUS):
            if size != 1 or value[0] > 1:
                raise EvidenceFormatError(f"opaque data: {name} must be one byte 0 or 1")
            out[name] = value[0]
        else:
            try:
                out[name] = value.decode("ascii")
            except UnicodeDecodeError as exc:
                raise EvidenceFormatError(f"opaque data: {name} is not ASCII") from exc
        pos += 4 + size
    missing = [n for n in OPAQUE_NAMES.values() if n not in out]
    if missing:
        raise EvidenceFormatError(f"opaque data: missing {', '.join(missing)}")
    return out


def claims(exchange: SpdmExchange, nonce: bytes, *, chain_ok: bool, signature_ok: bool) -> dict:
    """The claims a verifier reports for one GPU (names as in NVIDIA's attestation tokens)."""
    profile = GpuProfile(
        hwmodel=str(exchange.opaque["hwmodel"]),
        driver_version=str(exchange.opaque["driver_version"]),
        vbios_version=str(exchange.opaque["vbios_version"]),
    )
    golden = {i: golden_measurement(profile, i) for i in range(1, MEASUREMENT_BLOCKS + 1)}
    measured_ok = exchange.measurements == golden
    nonce_ok = exchange.request_nonce == nonce and exchange.response_nonce == nonce
    return {
        "measres": "comparison-successful" if measured_ok else "comparison-fail",
        "secboot": exchange.opaque["secure_boot"] == 1,
        "dbgstat": "disabled" if exchange.opaque["debug_status"] == 0 else "enabled",
        "hwmodel": profile.hwmodel,
        "x-nvidia-gpu-driver-version": profile.driver_version,
        "x-nvidia-gpu-vbios-version": profile.vbios_version,
        "x-nvidia-gpu-attestation-report-nonce-match": nonce_ok,
        "x-nvidia-gpu-attestation-report-signature-verified": signature_ok,
        "x-nvidia-gpu-attestation-report-cert-chain-validated": chain_ok,
        "x-nvidia-mock": True,
    }

"""Signed extrinsics (format version 4): decoding, mortality and signature checks.

Errors are ``InvalidTransaction`` with the reason strings Substrate's pool reports, so a client
sees the same JSON-RPC error (1010) it would from a real node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ops_tools.chainspec.hashing import blake2_256
from ops_tools.chainspec.scale import Reader, encode_compact
from ops_tools.devnode.crypto import verify
from ops_tools.devnode.runtime.definitions import MULTI_ADDRESS, RUNTIME_CALL
from ops_tools.devnode.runtime.types import DecodeError
from ops_tools.errors import OpsError

SIGNED_V4 = 0x84


class InvalidTransaction(Exception):
    """A transaction that can never be (or is not yet) valid; ``code`` is the JSON-RPC code."""

    def __init__(self, reason: str, code: int = 1010, message: str = "Invalid Transaction") -> None:
        super().__init__(reason)
        self.reason, self.code, self.message = reason, code, message


BAD_PROOF = "Transaction has a bad signature"
STALE = "Transaction is outdated"
FUTURE = "Transaction will be valid in the future"
PAYMENT = "Inability to pay some fees (e.g. account balance too low)"
ANCIENT = "Transaction has an ancient birth block"
CALL = "Transaction call is not expected"


@dataclass(frozen=True)
class Era:
    period: int = 0  # 0: immortal
    phase: int = 0

    @property
    def immortal(self) -> bool:
        return self.period == 0

    def birth(self, current: int) -> int:
        if self.immortal:
            return 0
        return (max(current, self.phase) - self.phase) // self.period * self.period + self.phase

    def death(self, current: int) -> int:
        return 1 << 64 if self.immortal else self.birth(current) + self.period


def decode_era(r: Reader) -> tuple[Era, bytes]:
    first = r.u8("era")
    if first == 0:
        return Era(), b"\x00"
    second = r.u8("era")
    encoded = first | (second << 8)
    period = 2 << (encoded % 16)
    quantize = max(period >> 12, 1)
    phase = (encoded >> 4) * quantize
    if period < 4 or phase >= period:
        raise DecodeError("invalid mortal era")
    return Era(period, phase), bytes((first, second))


@dataclass(frozen=True)
class Extrinsic:
    encoded: bytes  # as submitted: compact length prefix included
    hash: bytes
    signer: bytes
    scheme: str
    signature: bytes
    era: Era
    era_bytes: bytes
    nonce: int
    tip: int
    call: Any
    call_bytes: bytes

    @property
    def length(self) -> int:
        return len(self.encoded)

    def signing_payload(
        self, spec_version: int, tx_version: int, genesis: bytes, era_hash: bytes
    ) -> bytes:
        payload = (
            self.call_bytes
            + self.era_bytes
            + encode_compact(self.nonce)
            + encode_compact(self.tip)
            + spec_version.to_bytes(4, "little")
            + tx_version.to_bytes(4, "little")
            + genesis
            + era_hash
        )
        # Substrate signs payloads over 256 bytes by their hash.
        return blake2_256(payload) if len(payload) > 256 else payload

    def check_signature(
        self, spec_version: int, tx_version: int, genesis: bytes, era_hash: bytes
    ) -> None:
        payload = self.signing_payload(spec_version, tx_version, genesis, era_hash)
        if not verify(self.scheme, self.signature, payload, self.signer):
            raise InvalidTransaction(BAD_PROOF)


def decode_extrinsic(encoded: bytes) -> Extrinsic:
    """Decode a length-prefixed extrinsic; only signed ones are accepted from outside."""
    try:
        r = Reader(encoded, "extrinsic")
        length = r.compact("extrinsic length")
        if length != r.remaining():
            raise DecodeError(f"length prefix says {length} bytes, {r.remaining()} follow")
        version = r.u8("version")
        if version != SIGNED_V4:
            if version == 0x04:
                raise InvalidTransaction(CALL)
            raise DecodeError(f"unsupported extrinsic version byte 0x{version:02x}")
        address = MULTI_ADDRESS.decode(r)
        if address[0] not in ("Id", "Address32"):
            raise InvalidTransaction(
                "Transaction has an unknown signer address form (use Id)", 1010
            )
        sig_kind = r.u8("signature variant")
        if sig_kind == 0:
            scheme, sig = "Ed25519", r.fixed(64, "ed25519 signature")
        elif sig_kind == 1:
            scheme, sig = "Sr25519", r.fixed(64, "sr25519 signature")
        elif sig_kind == 2:
            r.fixed(65, "ecdsa signature")
            raise InvalidTransaction(BAD_PROOF)
        else:
            raise DecodeError(f"unknown signature variant {sig_kind}")
        era, era_bytes = decode_era(r)
        nonce = r.compact("nonce")
        tip = r.compact("tip")
        call_start = r.pos
        call = RUNTIME_CALL.decode(r)
        if r.remaining():
            raise DecodeError(f"{r.remaining()} trailing bytes after the call")
        call_bytes = encoded[call_start:]
    except (DecodeError, OpsError, ValueError, KeyError) as exc:
        raise InvalidTransaction(
            f"Could not decode: {exc}", 1001, "Extrinsic has invalid format"
        ) from None
    if nonce >= 1 << 32:
        raise InvalidTransaction(
            "Could not decode: nonce exceeds u32", 1001, "Extrinsic has invalid format"
        )
    return Extrinsic(
        encoded,
        blake2_256(encoded),
        address[1],
        scheme,
        sig,
        era,
        era_bytes,
        nonce,
        tip,
        call,
        call_bytes,
    )

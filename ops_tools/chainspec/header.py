"""Block header SCALE encoding and hash (``sp_runtime::generic::Header<u32, BlakeTwo256>``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ops_tools.chainspec.hashing import blake2_256
from ops_tools.chainspec.scale import Reader, encode_bytes, encode_compact

ZERO_HASH = bytes(32)

# DigestItem variant indices.
DIGEST_OTHER = 0
DIGEST_CONSENSUS = 4
DIGEST_SEAL = 5
DIGEST_PRE_RUNTIME = 6
DIGEST_RUNTIME_ENVIRONMENT_UPDATED = 8


@dataclass(frozen=True)
class DigestItem:
    kind: int
    engine: bytes = (
        b""  # 4-byte consensus engine id, e.g. b"aura"; empty for Other/RuntimeEnvUpdated
    )
    data: bytes = b""

    def encode(self) -> bytes:
        if self.kind in (DIGEST_CONSENSUS, DIGEST_SEAL, DIGEST_PRE_RUNTIME):
            return bytes((self.kind,)) + self.engine + encode_bytes(self.data)
        if self.kind == DIGEST_OTHER:
            return bytes((self.kind,)) + encode_bytes(self.data)
        return bytes((self.kind,))

    @classmethod
    def decode(cls, r: Reader) -> DigestItem:
        kind = r.u8("digest item kind")
        if kind in (DIGEST_CONSENSUS, DIGEST_SEAL, DIGEST_PRE_RUNTIME):
            return cls(kind, r.fixed(4, "consensus engine id"), r.bytes_vec("digest data"))
        if kind == DIGEST_OTHER:
            return cls(kind, b"", r.bytes_vec("digest data"))
        return cls(kind)


@dataclass(frozen=True)
class Header:
    parent_hash: bytes
    number: int
    state_root: bytes
    extrinsics_root: bytes
    digest: tuple[DigestItem, ...] = field(default_factory=tuple)

    def encode(self) -> bytes:
        return (
            self.parent_hash
            + encode_compact(self.number)
            + self.state_root
            + self.extrinsics_root
            + encode_compact(len(self.digest))
            + b"".join(item.encode() for item in self.digest)
        )

    def hash(self) -> bytes:
        return blake2_256(self.encode())

    @classmethod
    def decode(cls, data: bytes) -> Header:
        r = Reader(data, "block header")
        parent = r.fixed(32, "parent_hash")
        number = r.compact("number")
        state_root = r.fixed(32, "state_root")
        extrinsics_root = r.fixed(32, "extrinsics_root")
        digest = tuple(DigestItem.decode(r) for _ in range(r.compact("digest length")))
        return cls(parent, number, state_root, extrinsics_root, digest)

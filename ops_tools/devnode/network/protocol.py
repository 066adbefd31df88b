"""The development node's wire protocol: length-framed SCALE messages over TCP.

Not libp2p: a plain stream with a handshake that proves the node key (peer id) and carries the
genesis hash, then block announcements, block requests for sync, transactions and finality
votes. Pure encoding here; sockets live in ``service``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ops_tools.chainspec.scale import Reader, encode_bytes, encode_compact, encode_str

PROTOCOL_VERSION = 1
MAX_FRAME = 16 * 1024 * 1024
ROLE_FULL, ROLE_AUTHORITY = 1, 4

HELLO, AUTH, ANNOUNCE, BLOCK_REQUEST, BLOCK_RESPONSE, TRANSACTION, VOTE, REFUSE = range(8)


@dataclass(frozen=True)
class Hello:
    genesis: bytes
    public: bytes
    nonce: bytes
    role: int
    best_number: int
    best_hash: bytes

    def encode(self) -> bytes:
        return (
            bytes((HELLO, PROTOCOL_VERSION))
            + self.genesis
            + self.public
            + self.nonce
            + bytes((self.role,))
            + self.best_number.to_bytes(4, "little")
            + self.best_hash
        )

    @classmethod
    def decode(cls, r: Reader) -> Hello:
        version = r.u8("protocol version")
        if version != PROTOCOL_VERSION:
            raise ValueError(f"protocol version {version}, expected {PROTOCOL_VERSION}")
        return cls(r.fixed(32), r.fixed(32), r.fixed(32), r.u8(), r.u32(), r.fixed(32))


def auth_message(genesis: bytes, their_nonce: bytes, my_public: bytes) -> bytes:
    return b"devnode/auth" + genesis + their_nonce + my_public


def encode_auth(signature: bytes) -> bytes:
    return bytes((AUTH,)) + signature


@dataclass(frozen=True)
class BlockData:
    header: bytes
    body: bytes
    justification: bytes | None = None

    def encode(self) -> bytes:
        just = b"\x01" + encode_bytes(self.justification) if self.justification else b"\x00"
        return encode_bytes(self.header) + encode_bytes(self.body) + just

    @classmethod
    def decode(cls, r: Reader) -> BlockData:
        header, body = r.bytes_vec("header"), r.bytes_vec("body")
        just = r.bytes_vec("justification") if r.u8("justification flag") else None
        return cls(header, body, just)


def encode_announce(block: BlockData) -> bytes:
    return bytes((ANNOUNCE,)) + block.encode()


def encode_block_request(request_id: int, start: int, count: int) -> bytes:
    return bytes((BLOCK_REQUEST,)) + b"".join(
        n.to_bytes(4, "little") for n in (request_id, start, count)
    )


def encode_block_response(request_id: int, blocks: list[BlockData]) -> bytes:
    return (
        bytes((BLOCK_RESPONSE,))
        + request_id.to_bytes(4, "little")
        + encode_compact(len(blocks))
        + b"".join(b.encode() for b in blocks)
    )


def decode_blocks(r: Reader) -> list[BlockData]:
    return [BlockData.decode(r) for _ in range(r.compact("block count"))]


def encode_transaction(xt: bytes) -> bytes:
    return bytes((TRANSACTION,)) + encode_bytes(xt)


def encode_vote(vote: bytes) -> bytes:
    return bytes((VOTE,)) + vote


def encode_refuse(reason: str) -> bytes:
    return bytes((REFUSE,)) + encode_str(reason)


def frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload

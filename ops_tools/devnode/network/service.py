"""Peer-to-peer between development nodes: connections, handshake, sync and gossip.

Each connection starts with a handshake that carries the genesis hash (a node of another chain
is refused and told why) and proves the peer's node key (its peer id). Then:
- new best blocks are announced whole and imported through the same path as local blocks;
- a node behind its best peer requests blocks by number in batches until it is at the tip;
- transactions and finality votes are passed on to every other peer once.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ops_tools.chainspec.hashing import blake2_256
from ops_tools.chainspec.header import Header
from ops_tools.chainspec.scale import Reader
from ops_tools.devnode.chain import Head, ImportError_, decode_body, short
from ops_tools.devnode.config import parse_multiaddr
from ops_tools.devnode.crypto import KeyPair, verify
from ops_tools.devnode.finality import Vote
from ops_tools.devnode.network import protocol as p
from ops_tools.devnode.node_key import peer_id, public_of
from ops_tools.devnode.runtime.extrinsic import InvalidTransaction
from ops_tools.errors import OpsError

if TYPE_CHECKING:
    from ops_tools.devnode.node import Node

log = logging.getLogger("devnode")
HANDSHAKE_TIMEOUT = 5.0
REDIAL_SECONDS = 2.0
REFUSED_REDIAL_SECONDS = 30.0
SYNC_BATCH = 256
SYNC_TIMEOUT = 15.0
MAJOR_SYNC_DISTANCE = 4


@dataclass(eq=False)
class Peer:
    peer_id: str
    public: bytes
    writer: asyncio.StreamWriter
    role: int
    best_number: int
    best_hash: bytes
    address: str
    outbound: bool
    known: OrderedDict[bytes, None] = field(default_factory=OrderedDict)

    def send(self, payload: bytes) -> None:
        if self.writer.is_closing():
            return
        self.writer.write(p.frame(payload))

    def mark_known(self, key: bytes) -> bool:
        """Remember that the peer has ``key`` (block, tx or vote); returns whether it was new."""
        if key in self.known:
            return False
        self.known[key] = None
        if len(self.known) > 4096:
            self.known.popitem(last=False)
        return True


class Network:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.chain = node.chain
        self.identity = KeyPair("Ed25519", public_of(node.node_secret), node.node_secret)
        self.peer_id = peer_id(self.identity.public)
        self.peers: dict[str, Peer] = {}
        self.server: asyncio.AbstractServer | None = None
        self.tasks: list[asyncio.Task[None]] = []
        self.sync_inflight: tuple[int, str, float] | None = None
        self.sync_from_finalized = False
        self.request_seq = 0
        self.refused: set[str] = set()
        # Peer ids removed with system_removeReservedPeer: refused both ways until added again
        # (a Substrate node under --reserved-only does the same; the drills' partition).
        self.blocked: set[str] = set()
        self.dialing: set[str] = set()
        self.chain.import_listeners.append(self._on_import)
        node.pool.gossip.append(self._gossip_transaction)
        node.finality.gossip.append(self._gossip_vote)

    # ---- status ------------------------------------------------------------------------------
    def peer_count(self) -> int:
        return len(self.peers)

    def highest_seen(self) -> int:
        return max([self.chain.best.number] + [peer.best_number for peer in self.peers.values()])

    def is_syncing(self) -> bool:
        return self.sync_inflight is not None or (
            self.highest_seen() > self.chain.best.number + MAJOR_SYNC_DISTANCE
        )

    def peers_info(self) -> list[dict[str, Any]]:
        return [
            {
                "peerId": peer.peer_id,
                "roles": "AUTHORITY" if peer.role == p.ROLE_AUTHORITY else "FULL",
                "bestHash": "0x" + peer.best_hash.hex(),
                "bestNumber": peer.best_number,
            }
            for peer in self.peers.values()
        ]

    # ---- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        cfg = self.node.config
        try:
            self.server = await asyncio.start_server(
                self._inbound, cfg.p2p_host, cfg.p2p_port, reuse_address=True
            )
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise OpsError(
                    f"p2p port {cfg.p2p_host}:{cfg.p2p_port} is already in use;"
                    " choose another with --port"
                ) from None
            raise OpsError(
                f"p2p: cannot listen on {cfg.p2p_host}:{cfg.p2p_port}: {exc.strerror}"
            ) from None
        # --port 0 lets the OS choose: report the port actually bound.
        cfg.p2p_port = self.server.sockets[0].getsockname()[1]
        log.info(
            "🏷  Listening for peers on /ip4/%s/tcp/%d/p2p/%s",
            cfg.p2p_host,
            cfg.p2p_port,
            self.peer_id,
        )
        seen = set()
        for addr in cfg.bootnodes:
            host, port, expected = parse_multiaddr(addr, "bootnode")
            if expected == self.peer_id or (host, port) in seen:
                continue
            seen.add((host, port))
            self.tasks.append(asyncio.create_task(self._dial_loop(host, port, expected)))
        self.tasks.append(asyncio.create_task(self._sync_ticker()))

    def add_reserved_peer(self, address: str) -> None:
        """Dial ``address`` and keep the connection up (``system_addReservedPeer``)."""
        host, port, expected = parse_multiaddr(address, "peer address")
        if expected is None:
            raise OpsError(f"peer address {address!r}: needs /p2p/<peer id>")
        was_blocked = expected in self.blocked
        self.blocked.discard(expected)
        if was_blocked and expected in self.dialing:
            return  # its dial loop runs already and redials now that it is unblocked
        self.tasks.append(asyncio.create_task(self._dial_loop(host, port, expected)))

    def remove_reserved_peer(self, peer: str) -> None:
        """Disconnect ``peer`` and refuse it until ``add_reserved_peer`` names it again."""
        self.blocked.add(peer)
        connected = self.peers.get(peer)
        if connected is not None:
            connected.writer.close()
        log.info("🚫 Refusing peer %s until it is added again", peer)

    async def stop(self) -> None:
        for t in self.tasks:
            t.cancel()
        if self.server is not None:
            self.server.close()
        for peer in list(self.peers.values()):
            peer.writer.close()

    # ---- connections -------------------------------------------------------------------------
    async def _dial_loop(self, host: str, port: int, expected: str | None) -> None:
        if expected is not None:
            self.dialing.add(expected)
        while True:
            if expected in self.blocked:
                await asyncio.sleep(REDIAL_SECONDS)
                continue
            if expected is None or expected not in self.peers:
                try:
                    reader, writer = await asyncio.wait_for(
                        asyncio.open_connection(host, port), HANDSHAKE_TIMEOUT
                    )
                except (TimeoutError, OSError):
                    await asyncio.sleep(REDIAL_SECONDS)
                    continue
                await self._connection(reader, writer, True, expected, f"{host}:{port}")
            # A peer that refused us (another chain) is retried, but rarely.
            refused = f"{host}:{port}" in self.refused
            await asyncio.sleep(REFUSED_REDIAL_SECONDS if refused else REDIAL_SECONDS)

    async def _inbound(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        addr = writer.get_extra_info("peername")
        await self._connection(reader, writer, False, None, f"{addr[0]}:{addr[1]}" if addr else "?")

    async def _connection(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        outbound: bool,
        expected: str | None,
        address: str,
    ) -> None:
        peer = None
        try:
            peer = await asyncio.wait_for(
                self._handshake(reader, writer, outbound, expected, address), HANDSHAKE_TIMEOUT
            )
            if peer is not None:
                await self._serve_peer(peer, reader)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError, OpsError) as exc:
            log.debug("connection %s ended: %s", address, exc)
        finally:
            if peer is not None and self.peers.get(peer.peer_id) is peer:
                del self.peers[peer.peer_id]
                log.info("👋 Disconnected from %s (%d peers)", peer.peer_id, len(self.peers))
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _read(self, reader: asyncio.StreamReader) -> bytes:
        size = int.from_bytes(await reader.readexactly(4), "big")
        if size == 0 or size > p.MAX_FRAME:
            raise ValueError(f"frame of {size} bytes")
        return await reader.readexactly(size)

    async def _handshake(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        outbound: bool,
        expected: str | None,
        address: str,
    ) -> Peer | None:
        nonce = os.urandom(32)
        best = self.chain.best
        role = p.ROLE_AUTHORITY if self.node.validator else p.ROLE_FULL
        writer.write(
            p.frame(
                p.Hello(
                    self.chain.genesis_hash,
                    self.identity.public,
                    nonce,
                    role,
                    best.number,
                    best.hash,
                ).encode()
            )
        )
        msg = await self._read(reader)
        r = Reader(msg, "handshake")
        kind = r.u8()
        if kind == p.REFUSE:
            log.warning("❌ Peer %s refused the connection: %s", address, r.string())
            self.refused.add(address)
            return None
        if kind != p.HELLO:
            raise ValueError("expected a handshake")
        hello = p.Hello.decode(r)
        their_id = peer_id(hello.public)
        if hello.genesis != self.chain.genesis_hash:
            log.warning(
                "❌ Refusing peer %s at %s: different genesis (ours 0x%s, theirs 0x%s)",
                their_id,
                address,
                self.chain.genesis_hash.hex(),
                hello.genesis.hex(),
            )
            writer.write(
                p.frame(
                    p.encode_refuse(
                        f"different genesis: ours is 0x{self.chain.genesis_hash.hex()},"
                        f" yours 0x{hello.genesis.hex()}"
                    )
                )
            )
            await writer.drain()
            self.refused.add(address)
            return None
        if expected is not None and their_id != expected:
            log.warning(
                "❌ Refusing peer at %s: its peer id is %s, the bootnode address says %s",
                address,
                their_id,
                expected,
            )
            return None
        if their_id == self.peer_id or their_id in self.blocked:
            return None
        writer.write(
            p.frame(
                p.encode_auth(
                    self.identity.sign(
                        p.auth_message(self.chain.genesis_hash, hello.nonce, self.identity.public)
                    )
                )
            )
        )
        msg = await self._read(reader)
        if msg[0] != p.AUTH or not verify(
            "Ed25519",
            msg[1:65],
            p.auth_message(self.chain.genesis_hash, nonce, hello.public),
            hello.public,
        ):
            log.warning(
                "❌ Refusing peer %s at %s: it did not prove its node key", their_id, address
            )
            return None
        peer = Peer(
            their_id,
            hello.public,
            writer,
            hello.role,
            hello.best_number,
            hello.best_hash,
            address,
            outbound,
        )
        existing = self.peers.get(their_id)
        if existing is not None:
            # Both sides dialled: keep the connection opened by the smaller peer id, on both ends.
            dialer_of_new = self.peer_id if outbound else their_id
            if dialer_of_new != min(self.peer_id, their_id):
                return None
            existing.writer.close()
        self.peers[their_id] = peer
        log.info(
            "🤝 Connected to %s (%s) at %s, best #%d (%d peers)",
            their_id,
            "authority" if hello.role == p.ROLE_AUTHORITY else "full",
            address,
            hello.best_number,
            len(self.peers),
        )
        for vote in self.node.finality.votes.values():
            peer.send(p.encode_vote(vote.encode()))
        self._maybe_sync()
        return peer

    # ---- messages ----------------------------------------------------------------------------
    async def _serve_peer(self, peer: Peer, reader: asyncio.StreamReader) -> None:
        while True:
            msg = await self._read(reader)
            r = Reader(msg, f"message from {peer.peer_id}")
            kind = r.u8()
            if kind == p.ANNOUNCE:
                self._on_announce(peer, p.BlockData.decode(r))
            elif kind == p.BLOCK_REQUEST:
                request_id, start, count = r.u32(), r.u32(), r.u32()
                peer.send(
                    p.encode_block_response(
                        request_id, self._blocks_from(start, min(count, SYNC_BATCH))
                    )
                )
            elif kind == p.BLOCK_RESPONSE:
                request_id = r.u32()
                await self._on_blocks(peer, request_id, p.decode_blocks(r))
            elif kind == p.TRANSACTION:
                self._on_transaction(peer, r.bytes_vec())
            elif kind == p.VOTE:
                vote = Vote.decode(r)
                peer.mark_known(vote.encode())
                self.node.finality.add_vote(vote)
            if self.sync_inflight is None and peer.best_number > self.chain.best.number:
                self._maybe_sync()
            if peer.writer.transport.get_write_buffer_size() > 64 * 1024 * 1024:
                raise ValueError("peer does not read its messages")

    def _blocks_from(self, start: int, count: int) -> list[p.BlockData]:
        out = []
        for n in range(start, start + count):
            h = self.chain.canon_hash(n)
            if h is None:
                break
            row = self.chain.db.block(h)
            if row is None:
                break
            out.append(p.BlockData(row[2], row[3], row[4]))
        return out

    def _on_announce(self, peer: Peer, block: p.BlockData) -> None:
        header = Header.decode(block.header)
        h = header.hash()
        peer.mark_known(h)
        if header.number >= peer.best_number:
            peer.best_number, peer.best_hash = header.number, h
        if self.chain.header(h) is not None or self.sync_inflight is not None:
            return
        try:
            self.chain.import_block(header, decode_body(block.body), peer.peer_id)
        except ImportError_ as exc:
            if exc.unknown_parent:
                self._maybe_sync()
            else:
                log.warning("💔 Block #%d from %s refused: %s", header.number, peer.peer_id, exc)

    def _on_transaction(self, peer: Peer, xt: bytes) -> None:
        peer.mark_known(blake2_256(xt))
        try:
            self.node.pool.submit(xt, from_peer=True)
        except InvalidTransaction:
            return
        self._broadcast(p.encode_transaction(xt), blake2_256(xt))

    def _broadcast(self, payload: bytes, key: bytes) -> None:
        for peer in list(self.peers.values()):
            if peer.mark_known(key):
                peer.send(payload)

    def _gossip_transaction(self, xt: bytes) -> None:
        self._broadcast(p.encode_transaction(xt), blake2_256(xt))

    def _gossip_vote(self, vote: Vote) -> None:
        encoded = vote.encode()
        self._broadcast(p.encode_vote(encoded), encoded)

    def _on_import(self, head: Head, is_best: bool, origin: str) -> None:
        if not is_best or origin == "sync":
            return
        row = self.chain.db.block(head.hash)
        if row is None:
            return
        payload = p.encode_announce(p.BlockData(row[2], row[3]))
        for peer in list(self.peers.values()):
            if peer.peer_id != origin and peer.mark_known(head.hash):
                peer.send(payload)

    # ---- sync --------------------------------------------------------------------------------
    def _maybe_sync(self) -> None:
        if self.sync_inflight is not None:
            return
        best = self.chain.best.number
        candidates = [peer for peer in self.peers.values() if peer.best_number > best]
        if not candidates:
            return
        peer = max(candidates, key=lambda x: x.best_number)
        start = self.chain.finalized.number + 1 if self.sync_from_finalized else best + 1
        self.request_seq += 1
        self.sync_inflight = (self.request_seq, peer.peer_id, time.monotonic())
        peer.send(p.encode_block_request(self.request_seq, start, SYNC_BATCH))

    async def _on_blocks(self, peer: Peer, request_id: int, blocks: list[p.BlockData]) -> None:
        if self.sync_inflight is None or self.sync_inflight[0] != request_id:
            return
        imported = 0
        try:
            for i, block in enumerate(blocks):
                header = Header.decode(block.header)
                try:
                    if self.chain.import_block(header, decode_body(block.body), "sync"):
                        imported += 1
                except ImportError_ as exc:
                    if exc.unknown_parent and not self.sync_from_finalized:
                        self.sync_from_finalized = True  # we are on a fork: go back to finality
                        return
                    log.warning(
                        "💔 Sync from %s stopped at #%d: %s", peer.peer_id, header.number, exc
                    )
                    return
                if block.justification:
                    self.node.finality.import_justification(header.hash(), block.justification)
                if i % 16 == 15:
                    await asyncio.sleep(0)  # let RPC and other peers be served during a long sync
            self.sync_from_finalized = False
            if imported:
                best = self.chain.best
                log.info(
                    "⚙️  Synced to #%d (%s) from %s (%d peers)",
                    best.number,
                    short(best.hash),
                    peer.peer_id,
                    len(self.peers),
                )
        finally:
            self.sync_inflight = None
            if blocks:
                self._maybe_sync()

    async def _sync_ticker(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            if (
                self.sync_inflight is not None
                and time.monotonic() - self.sync_inflight[2] > SYNC_TIMEOUT
            ):
                log.warning("sync request to %s timed out", self.sync_inflight[1])
                self.sync_inflight = None
            self._maybe_sync()

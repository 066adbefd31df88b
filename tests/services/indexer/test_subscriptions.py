"""Subscriptions over WebSocket (graphql-transport-ws) against the API program and a running
development chain, on SQLite and on PostgreSQL: a transfer to a fresh account made with
substrate-interface arrives on a filtered ``transfers`` subscription, ``newBlocks`` delivers
consecutive blocks, a subscription over the per-connection or per-address limit is refused
naming it, a subscriber left more blocks behind than allowed is closed with the
slow-consumer code, and one that stops reading is dropped (reset) and its slots freed."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import socket
import time

import pytest
import websockets
from substrateinterface import Keypair

from tests.services.indexer.chain_ops import TOKEN, fresh_account, submit
from tests.services.indexer.harness import Indexer

ALICE = Keypair.create_from_uri("//Alice", ss58_format=42)
TRANSFERS_S = """subscription($a: String!) { transfers(filter: {to: {equalTo: $a}}) {
  from to amount blockNumber extrinsicHash } }"""


async def _next(ws: websockets.ClientConnection, timeout: float = 60) -> dict:
    return json.loads(await asyncio.wait_for(ws.recv(), timeout))


def test_a_transfer_arrives_on_its_subscription_and_limits_hold(chain, database_url, tmp_path):
    ix = Indexer(tmp_path / "indexer", chain.ws, database_url,
                 max_subscriptions_per_connection=2, max_subscriptions_per_address=3)
    ix.start()
    try:
        ix.wait_height(2)
        dest = fresh_account().ss58_address

        async def run() -> None:
            url = ix.url.replace("http://", "ws://") + "/graphql"
            async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:
                await ws.send(json.dumps({"type": "connection_init"}))
                assert (await _next(ws))["type"] == "connection_ack"
                await ws.send(json.dumps({"id": "t", "type": "subscribe", "payload": {
                    "query": TRANSFERS_S, "variables": {"a": dest}}}))
                await ws.send(json.dumps({"id": "b", "type": "subscribe", "payload": {
                    "query": "subscription { newBlocks { number } }"}}))
                await ws.send(json.dumps({"id": "x", "type": "subscribe", "payload": {
                    "query": "subscription { newBlocks { number } }"}}))
                sent = asyncio.create_task(asyncio.to_thread(
                    submit, chain.ws, ALICE, "Balances", "transfer_keep_alive",
                    {"dest": dest, "value": 3 * TOKEN}))
                got: dict[str, list] = {"t": [], "b": [], "x": []}
                deadline = time.monotonic() + 90
                while not got["t"] or len(got["b"]) < 3 or len(got["x"]) < 2:
                    assert time.monotonic() < deadline, got
                    msg = await _next(ws)
                    got[msg["id"]].append(msg)
                number, xt_hash = await sent
                # Refused as it starts: an error naming the limit, then complete.
                refused, done = got["x"]
                assert done == {"id": "x", "type": "complete"}, got["x"]
                assert refused["payload"]["data"] is None
                assert "2 open on this connection, at most 2" in \
                    refused["payload"]["errors"][0]["message"]
                (transfer,) = [m for m in got["t"] if m["type"] == "next"]
                assert transfer["payload"]["data"]["transfers"] == {
                    "from": ALICE.ss58_address, "to": dest, "amount": str(3 * TOKEN),
                    "blockNumber": number, "extrinsicHash": xt_hash}
                blocks = [m["payload"]["data"]["newBlocks"]["number"] for m in got["b"]]
                assert blocks == list(range(blocks[0], blocks[0] + len(blocks))), blocks

                # Another connection from the same address: one more is allowed (3 in all).
                async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as two:
                    await two.send(json.dumps({"type": "connection_init"}))
                    assert (await _next(two))["type"] == "connection_ack"
                    for op in ("y1", "y2"):
                        await two.send(json.dumps({"id": op, "type": "subscribe", "payload": {
                            "query": "subscription { newBlocks { number } }"}}))
                    seen: dict[str, list] = {"y1": [], "y2": []}
                    while not seen["y1"] or len(seen["y2"]) < 2:
                        assert time.monotonic() < deadline + 60, seen
                        msg = await _next(two)
                        seen[msg["id"]].append(msg)
                    assert seen["y1"][0]["type"] == "next" and seen["y1"][0]["payload"].get(
                        "data"), seen["y1"]
                    assert "3 open from 127.0.0.1, at most 3" in \
                        seen["y2"][0]["payload"]["errors"][0]["message"], seen["y2"]

        asyncio.run(run())
    finally:
        ix.stop()


def test_a_subscriber_left_behind_is_closed_with_the_slow_consumer_code(chain, tmp_path):
    """The processor is held back while blocks arrive, then writes them in one commit: the
    subscriber is more blocks behind than it may be, as one that reads slower than blocks
    arrive, and its connection is closed with 4419."""
    ix = Indexer(tmp_path / "indexer", chain.ws, f"sqlite:///{tmp_path / 'ix.db'}",
                 subscription_max_backlog=3)
    ix.start()
    try:
        height = ix.wait_height(2)["height"]
        ix.stop("processor")

        async def run() -> None:
            url = ix.url.replace("http://", "ws://") + "/graphql"
            async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:
                await ws.send(json.dumps({"type": "connection_init"}))
                assert (await _next(ws))["type"] == "connection_ack"
                await ws.send(json.dumps({"id": "b", "type": "subscribe", "payload": {
                    "query": "subscription { newBlocks { number } }"}}))
                await asyncio.to_thread(chain.wait_for, lambda: chain.best() > height + 8,
                                        60, "blocks while the processor is stopped")
                ix.start_processor()
                with pytest.raises(websockets.ConnectionClosed) as closed:
                    while True:
                        await _next(ws)
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 4419

        asyncio.run(run())
    finally:
        ix.stop()


def test_events_unfiltered_transfers_and_index_status_subscriptions(chain, database_url,
                                                                    tmp_path):
    """``events(filter)`` by an account, ``transfers`` with no filter (every new transfer) and
    ``indexStatus`` (at once, then after commits) on one connection."""
    ix = Indexer(tmp_path / "indexer", chain.ws, database_url)
    ix.start()
    try:
        ix.wait_height(2)
        dest = fresh_account().ss58_address

        async def run() -> None:
            url = ix.url.replace("http://", "ws://") + "/graphql"
            async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:
                await ws.send(json.dumps({"type": "connection_init"}))
                assert (await _next(ws))["type"] == "connection_ack"
                for op, query in (
                        ("e", "subscription($a: String!) { events(filter: {account: {equalTo: "
                              "$a}}) { blockNumber pallet name args } }"),
                        ("t", "subscription { transfers { to amount blockNumber } }"),
                        ("s", "subscription { indexStatus { height genesisHash } }")):
                    await ws.send(json.dumps({"id": op, "type": "subscribe", "payload": {
                        "query": query, "variables": {"a": dest}}}))
                sent = asyncio.create_task(asyncio.to_thread(
                    submit, chain.ws, ALICE, "Balances", "transfer_keep_alive",
                    {"dest": dest, "value": 2 * TOKEN}))
                got: dict[str, list] = {"e": [], "t": [], "s": []}
                deadline = time.monotonic() + 90

                def mine() -> list[dict]:
                    return [m["payload"]["data"]["transfers"] for m in got["t"]
                            if m["payload"]["data"]["transfers"]["to"] == dest]
                def status_reached() -> bool:  # the status's message for the transfer's block
                    number = sent.result()[0]
                    return any(m["payload"]["data"]["indexStatus"]["height"] >= number
                               for m in got["s"])

                # Each subscription sends on its own: the transfer's messages may come before the
                # status's for the same block.
                while not sent.done() or not mine() or not any(
                        m["payload"]["data"]["events"]["name"] == "Transfer" for m in got["e"]) \
                        or not status_reached():
                    assert time.monotonic() < deadline, got
                    with contextlib.suppress(TimeoutError):
                        msg = await _next(ws, timeout=1)
                        assert msg["type"] == "next" and not msg["payload"].get("errors"), msg
                        got[msg["id"]].append(msg)
                number, _xt = await sent
                assert mine() == [{"to": dest, "amount": str(2 * TOKEN), "blockNumber": number}]
                events = [m["payload"]["data"]["events"] for m in got["e"]]
                assert {e["blockNumber"] for e in events} == {number}, events
                assert all(dest in json.dumps(e["args"]) for e in events), events
                (transfer,) = [e for e in events if e["name"] == "Transfer"]
                assert transfer["pallet"] == "Balances" and transfer["args"]["to"] == dest
                # Unfiltered: transfers to others come too, if any; none is sent twice.
                keys = [(m["payload"]["data"]["transfers"]["blockNumber"],
                         m["payload"]["data"]["transfers"]["to"]) for m in got["t"]]
                assert len(keys) == len(set(keys))
                # A message per change of the status (its finalized and chain heights too), so
                # a height may repeat; it never goes back.
                heights = [m["payload"]["data"]["indexStatus"]["height"] for m in got["s"]]
                assert len(set(heights)) >= 2 and heights == sorted(heights), heights
                assert heights[-1] >= number

        asyncio.run(run())
    finally:
        ix.stop()


# ~80 kB a message (a thousand aliases of a block's hash), so that a client that does not read
# fills the kernel's buffers and the server's in seconds.
FAT_BLOCKS = "subscription { newBlocks { " + " ".join(
    f"h{i}: hash" for i in range(1000)) + " } }"


class StalledClient:
    """A raw WebSocket client (graphql-transport-ws, no compression) with a small receive
    buffer, set before connecting so that the window it offers stays small: it subscribes, then
    reads nothing."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.settimeout(60)
        self.sock.connect(("127.0.0.1", port))
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            f"GET /graphql HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Sec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n".encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(4096)
            assert chunk, self.buf
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head

    def send(self, message: dict) -> None:
        payload, mask = json.dumps(message).encode(), os.urandom(4)
        n = len(payload)
        size = (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + n.to_bytes(2, "big")
                if n < 1 << 16 else bytes([0x80 | 127]) + n.to_bytes(8, "big"))
        self.sock.sendall(b"\x81" + size + mask
                          + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def _exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            assert chunk, "the server closed the connection"
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def receive(self) -> dict:
        """The next text message (the server sends no fragments or pings this early)."""
        first, second = self._exactly(2)
        assert first == 0x81, hex(first)
        n = second & 0x7F
        if n == 126:
            n = int.from_bytes(self._exactly(2), "big")
        elif n == 127:
            n = int.from_bytes(self._exactly(8), "big")
        return json.loads(self._exactly(n))

    def ended(self, timeout: float) -> str:
        """Reads what is left until the connection ends: how it ended (or '' at the timeout)."""
        deadline = time.monotonic() + timeout
        self.sock.settimeout(5)
        while time.monotonic() < deadline:
            try:
                if not self.sock.recv(1 << 20):
                    return "closed"
            except ConnectionResetError:
                return "reset"
            except TimeoutError:
                continue
        return ""

    def close(self) -> None:
        self.sock.close()


async def _subscribe_status(url: str, ops: int) -> list[dict]:
    """On a new connection, ``ops`` indexStatus subscriptions (each answers at once): the first
    message of each, then the connection is closed."""
    async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:
        await ws.send(json.dumps({"type": "connection_init"}))
        assert (await _next(ws))["type"] == "connection_ack"
        for i in range(ops):
            await ws.send(json.dumps({"id": f"p{i}", "type": "subscribe", "payload": {
                "query": "subscription { indexStatus { height } }"}}))
        first: dict[str, dict] = {}
        while len(first) < ops:
            msg = await _next(ws)
            first.setdefault(msg["id"], msg)
        return [first[f"p{i}"] for i in range(ops)]


def test_a_subscriber_that_stops_reading_is_dropped_and_its_slots_freed(chain, tmp_path):
    """The attack: a client subscribes (up to its address's limit) to big messages and reads
    no more. The server's sends wait on a full buffer; after ``subscription_send_timeout_s``
    the server drops the client (its close frame cannot be sent: the connection is aborted),
    its subscriptions end, and the address may subscribe up to its limit again."""
    ix = Indexer(tmp_path / "indexer", chain.ws, f"sqlite:///{tmp_path / 'ix.db'}",
                 max_subscriptions_per_connection=3, max_subscriptions_per_address=3,
                 subscription_send_timeout_s=2)
    ix.start()
    attacker = None
    try:
        ix.wait_height(2)
        ix.stop("processor")  # no commit, no message: the attacker's slots held, still quiet
        url = ix.url.replace("http://", "ws://") + "/graphql"
        attacker = StalledClient(ix.port)
        attacker.send({"type": "connection_init"})
        assert attacker.receive()["type"] == "connection_ack"
        for op, query in (("a", FAT_BLOCKS), ("b", FAT_BLOCKS),
                          ("s", "subscription { indexStatus { height } }")):
            attacker.send({"id": op, "type": "subscribe", "payload": {"query": query}})
        started = attacker.receive()  # indexStatus answers at once; the blocks wait for a commit
        assert started["id"] == "s" and started["type"] == "next", started

        # The address's three slots are the attacker's: a fourth subscription is refused.
        deadline = time.monotonic() + 60
        while True:
            (probe,) = asyncio.run(_subscribe_status(url, 1))
            if probe["type"] == "next" and probe["payload"].get("errors"):
                assert "3 open from 127.0.0.1, at most 3" in \
                    probe["payload"]["errors"][0]["message"], probe
                break
            assert time.monotonic() < deadline, probe  # the attacker's still registering
            time.sleep(1)

        ix.start_processor()  # ~80 kB per block per subscription from now on, never read
        deadline = time.monotonic() + 180
        while True:
            time.sleep(2)
            answers = asyncio.run(_subscribe_status(url, 3))
            if all(not a["payload"].get("errors") for a in answers):
                break
            assert time.monotonic() < deadline, (answers, ix.logs())
        assert all(a["type"] == "next" and a["payload"]["data"]["indexStatus"]["height"] >= 2
                   for a in answers), answers
        # Its close frame could not be sent (the buffer was still full): the connection was
        # aborted, and the attacker, reading at last, finds it reset.
        assert attacker.ended(60) == "reset"
        log = (tmp_path / "indexer" / "api.log").read_text()
        assert ("subscriber 127.0.0.1 dropped (a message not sent within 2 s): the close frame "
                "could not be sent either, connection aborted") in log, log[-3000:]
    finally:
        if attacker is not None:
            attacker.close()
        ix.stop()

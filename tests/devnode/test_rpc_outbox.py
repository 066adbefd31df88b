"""The order and the bound of what the node's RPC server sends one WebSocket client.

In process, on a loopback port: the node's own ``Api`` and ``RpcServer`` behind a real WebSocket
client. The node is a stand-in (``_Node``) that holds a best head and imports the next one: the
race needs a block import at one exact turn of the event loop, which a node process cannot be
made to take.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import aiohttp
from aiohttp import WSCloseCode, WSMsgType, web

from ops_tools.chainspec.header import Header
from ops_tools.devnode.chain import Head
from ops_tools.devnode.rpc.methods import Api
from ops_tools.devnode.rpc.server import OUTBOX_LIMIT, RpcServer


def _head(number: int) -> Head:
    header = Header(bytes(32), number, bytes(32), bytes(32))
    return Head(header.hash(), number, header)


class _Node:
    """What ``Api`` reads of a node for head subscriptions (test double)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.chain = SimpleNamespace(best=_head(1), finalized=_head(1))
        self.new_heads: list[Callable[[Head], None]] = []
        self.all_heads: list[Callable[[Head], None]] = []
        self.finalized_heads: list[Callable[[Head], None]] = []

    def import_head(self, head: Head) -> None:
        self.chain.best = head
        for push in list(self.new_heads):
            push(head)


@asynccontextmanager
async def _client(table: dict[str, Any]) -> AsyncIterator[aiohttp.ClientWebSocketResponse]:
    """A WebSocket client of an RPC server that serves ``table`` on a loopback port."""
    runner = web.AppRunner(RpcServer(table, set(), True, 1 << 20, None).app())
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        url = f"ws://127.0.0.1:{runner.addresses[0][1]}"
        async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
            yield ws
    finally:
        await runner.cleanup()


def _subscribe(rid: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "chain_subscribeNewHeads", "params": []}


def test_the_first_head_comes_before_a_block_imported_in_the_same_turn():
    async def scenario() -> tuple[dict[str, Any], list[int]]:
        node = _Node(asyncio.get_running_loop())
        table = Api(node).methods()  # type: ignore[arg-type]
        subscribe = table["chain_subscribeNewHeads"]

        def subscribe_while_a_block_lands(p: list[Any], c: Any) -> Any:
            # The import is already due on the loop when the subscription is made, as when a
            # slot ticks while a busy machine held the node off the processor.
            node.loop.call_soon(node.import_head, _head(2))
            return subscribe(p, c)

        table["chain_subscribeNewHeads"] = subscribe_while_a_block_lands
        async with _client(table) as ws:
            await ws.send_json(_subscribe(1))
            reply = await ws.receive_json(timeout=10)
            notes = [await ws.receive_json(timeout=10) for _ in range(2)]
        return reply, [int(n["params"]["result"]["number"], 16) for n in notes]

    reply, numbers = asyncio.run(scenario())
    assert reply["id"] == 1 and isinstance(reply["result"], str)
    assert numbers == [1, 2]


def test_a_client_that_stops_reading_is_dropped_and_its_subscription_ends():
    async def scenario() -> tuple[int | None, list[Any]]:
        node = _Node(asyncio.get_running_loop())
        async with _client(Api(node).methods()) as ws:  # type: ignore[arg-type]
            await ws.send_json(_subscribe(1))
            assert (await ws.receive_json(timeout=10))["id"] == 1
            # The client reads nothing more while the node imports more heads than the outbox
            # holds, all in one turn of the loop.
            for number in range(2, OUTBOX_LIMIT + 10):
                node.import_head(_head(number))
            while (await ws.receive(timeout=10)).type not in (WSMsgType.CLOSE, WSMsgType.CLOSED):
                pass
            return ws.close_code, list(node.new_heads)

    code, still_subscribed = asyncio.run(scenario())
    assert code == WSCloseCode.POLICY_VIOLATION
    assert still_subscribed == []

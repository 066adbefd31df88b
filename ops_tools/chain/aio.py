"""A small asyncio JSON-RPC client over one WebSocket: calls, batches and subscriptions, every
call with a timeout and every message bounded in size.

Batches matter for catching up: one round trip carries a hundred ``chain_getBlock`` requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Sequence
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect

from ops_tools.chain.rpc import RpcError
from ops_tools.chain.urls import ws_url

# A catch-up batch of a hundred full blocks is one message.
MAX_MESSAGE_BYTES = 256 * 1024 * 1024

__all__ = ["MAX_MESSAGE_BYTES", "RpcClient", "RpcError"]


class RpcClient:
    def __init__(self, url: str, timeout_s: float = 60.0) -> None:
        # timeout_s bounds a catch-up batch (a hundred blocks under load); calls that only ask
        # for the head pass a shorter one.
        self.url = ws_url(url)
        self.timeout_s = timeout_s
        self._ids = itertools.count(1)
        self._pending: dict[int, _Answer] = {}
        self._subs: dict[str, asyncio.Queue[Any]] = {}
        self._early: dict[str, list[Any]] = {}
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self.closed = asyncio.Event()

    async def __aenter__(self) -> RpcClient:
        # No permessage-deflate: on loopback or a LAN it costs both ends more CPU than it saves.
        # A node that restarts closes the socket (noticed at once); pings every 5 s notice one
        # that vanished without closing (its machine gone) within 15 s rather than a minute.
        self._ws = await connect(self.url, max_size=MAX_MESSAGE_BYTES, open_timeout=5,
                                 compression=None, ping_interval=5, ping_timeout=10)
        self._reader = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._reader:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        if self._ws:
            await self._ws.close()
        self._fail_all(RpcError("connection closed"))

    def _fail_all(self, exc: Exception) -> None:
        for waiting in self._pending.values():
            waiting.fail(exc)
        self._pending.clear()
        for queue in self._subs.values():
            queue.put_nowait(exc)
        self.closed.set()

    async def _read(self) -> None:
        assert self._ws is not None
        try:
            async for message in self._ws:
                data = orjson.loads(message)
                for item in data if isinstance(data, list) else [data]:
                    self._dispatch(item)
            self._fail_all(RpcError(f"{self.url}: connection closed by the node"))
        except Exception as exc:
            self._fail_all(RpcError(f"{self.url}: {exc}"))

    def _dispatch(self, item: dict[str, Any]) -> None:
        if "id" in item and item["id"] in self._pending:
            self._pending.pop(item["id"]).answer(item)
        elif "params" in item and isinstance(item["params"], dict):
            sub = item["params"].get("subscription")
            if sub in self._subs:
                self._subs[sub].put_nowait(item["params"].get("result"))
            else:
                self._early.setdefault(sub, []).append(item["params"].get("result"))

    async def _send(self, payload: Any) -> None:
        if self._ws is None or self.closed.is_set():
            raise RpcError(f"{self.url}: not connected")
        await self._ws.send(orjson.dumps(payload).decode())

    async def call(self, method: str, params: list[Any] | None = None,
                   timeout_s: float | None = None) -> Any:
        return (await self.batch([(method, params or [])], timeout_s))[0]

    async def batch(self, calls: Sequence[tuple[str, list[Any]]],
                    timeout_s: float | None = None) -> list[Any]:
        if not calls:
            return []
        timeout = timeout_s or self.timeout_s
        # One future per batch, not per call: a catch-up batch carries two hundred calls, and a
        # future each (with gather's callbacks) was a fair share of the client's CPU.
        waiting = _Batch(len(calls), asyncio.get_running_loop().create_future())
        payload = []
        for i, (method, params) in enumerate(calls):
            rid = next(self._ids)
            self._pending[rid] = _Answer(waiting, i)
            payload.append({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        try:
            await self._send(payload if len(payload) > 1 else payload[0])
            return await asyncio.wait_for(waiting.done, timeout)
        except TimeoutError:
            raise RpcError(f"{self.url}: no answer to {calls[0][0]} within "
                           f"{timeout:.0f} s") from None
        finally:
            for item in payload:
                self._pending.pop(item["id"], None)

    async def subscribe(self, method: str, params: list[Any] | None = None) -> asyncio.Queue[Any]:
        sub_id = await self.call(method, params or [])
        queue: asyncio.Queue[Any] = asyncio.Queue()
        for early in self._early.pop(sub_id, []):
            queue.put_nowait(early)
        self._subs[sub_id] = queue
        return queue


class _Batch:
    """The answers of one batch, in the order of its calls; done when all arrived or one
    failed."""

    __slots__ = ("done", "left", "results")

    def __init__(self, size: int, done: asyncio.Future[list[Any]]) -> None:
        self.results: list[Any] = [None] * size
        self.left = size
        self.done = done


class _Answer:
    """Where the answer to one call of a batch goes."""

    __slots__ = ("batch", "index")

    def __init__(self, batch: _Batch, index: int) -> None:
        self.batch, self.index = batch, index

    def answer(self, item: dict[str, Any]) -> None:
        batch = self.batch
        if batch.done.done():
            return
        if "error" in item:
            batch.done.set_exception(RpcError(f"{item['error']}"))
            return
        batch.results[self.index] = item.get("result")
        batch.left -= 1
        if batch.left == 0:
            batch.done.set_result(batch.results)

    def fail(self, exc: Exception) -> None:
        if not self.batch.done.done():
            self.batch.done.set_exception(exc)

"""A small asyncio JSON-RPC client over one WebSocket: calls, batches and subscriptions.

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

MAX_MESSAGE_BYTES = 256 * 1024 * 1024


class RpcError(Exception):
    """The node answered with a JSON-RPC error, or the connection is gone."""


class RpcClient:
    def __init__(self, url: str, timeout_s: float = 60.0) -> None:
        # timeout_s bounds a catch-up batch (a hundred blocks under load); calls that only ask
        # for the head pass a shorter one.
        self.url = url
        self.timeout_s = timeout_s
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
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
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(exc)
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
            fut = self._pending.pop(item["id"])
            if fut.done():
                return
            if "error" in item:
                fut.set_exception(RpcError(f"{item['error']}"))
            else:
                fut.set_result(item.get("result"))
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
        loop = asyncio.get_running_loop()
        timeout = timeout_s or self.timeout_s
        ids, futures, payload = [], [], []
        for method, params in calls:
            rid = next(self._ids)
            fut: asyncio.Future[Any] = loop.create_future()
            self._pending[rid] = fut
            ids.append(rid)
            futures.append(fut)
            payload.append({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        try:
            await self._send(payload if len(payload) > 1 else payload[0])
            return list(await asyncio.wait_for(asyncio.gather(*futures), timeout))
        except TimeoutError:
            raise RpcError(f"{self.url}: no answer to {calls[0][0]} within "
                           f"{timeout:.0f} s") from None
        finally:
            for rid in ids:
                self._pending.pop(rid, None)

    async def subscribe(self, method: str, params: list[Any] | None = None) -> asyncio.Queue[Any]:
        sub_id = await self.call(method, params or [])
        queue: asyncio.Queue[Any] = asyncio.Queue()
        for early in self._early.pop(sub_id, []):
            queue.put_nowait(early)
        self._subs[sub_id] = queue
        return queue

"""JSON-RPC 2.0 over HTTP POST and WebSocket on one port (as a Substrate node serves it).

Errors follow jsonrpsee's codes: -32700 parse error, -32600 invalid request, -32601 method not
found (also for unsafe methods refused under ``--rpc-methods safe``), -32602 invalid params,
-32007 request too big.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import WSCloseCode, WSMsgType, web

log = logging.getLogger("devnode")


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data

    def to_json(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


def invalid_params(detail: str) -> RpcError:
    return RpcError(-32602, "Invalid params", detail)


# A client that leaves this many messages unread is dropped, as Substrate's RPC server drops a
# subscriber whose buffer is full: one slow reader must not hold the node's memory hostage.
OUTBOX_LIMIT = 1024


class Connection:
    """One client: its subscriptions and, over WebSocket, one ordered outbox.

    Replies and notifications leave through one queue that one task drains, so the client reads
    them in the order the node made them: a subscription's first head before the heads imported
    after it, and the reply that names a subscription before any of its notifications.
    """

    def __init__(
        self,
        send: Callable[[bytes], Awaitable[None]] | None,
        hang_up: Callable[[], Awaitable[Any]] | None = None,
        limit: int = OUTBOX_LIMIT,
    ) -> None:
        self._send, self._hang_up = send, hang_up
        self._outbox: asyncio.Queue[bytes] | None = asyncio.Queue(limit) if send else None
        self._opening: list[Stream] = []
        self._closing: asyncio.Task[Any] | None = None
        self.subscriptions: dict[str, Callable[[], None]] = {}
        self.closed = False

    @property
    def can_subscribe(self) -> bool:
        return self._send is not None

    def new_id(self) -> str:
        return secrets.token_urlsafe(12)

    def stream(self, method: str) -> Stream:
        """A new subscription's notifications, held until the reply that names it is queued."""
        stream = Stream(self, method, self.new_id())
        self._opening.append(stream)
        return stream

    async def reply(self, msg: bytes | None) -> None:
        if msg is not None and self._outbox is not None:
            # A client that sends faster than it reads waits here: its requests stay unread.
            await self._outbox.put(msg)
        opening, self._opening = self._opening, []
        for stream in opening:
            stream.open()

    def queue(self, msg: bytes) -> None:
        if self.closed or self._outbox is None:
            return
        try:
            self._outbox.put_nowait(msg)
        except asyncio.QueueFull:
            log.warning(
                "Dropping a WebSocket client that left %d messages unread", self._outbox.qsize()
            )
            self.close()
            # Emptied, so that a reply waiting for room goes on and the request loop sees the
            # socket close; the pump sends nothing more.
            while not self._outbox.empty():
                self._outbox.get_nowait()
            if self._hang_up is not None:
                self._closing = asyncio.get_running_loop().create_task(self._hang_up())

    async def pump(self) -> None:
        assert self._outbox is not None and self._send is not None
        while True:
            msg = await self._outbox.get()
            if self.closed:
                continue
            with contextlib.suppress(ConnectionError, RuntimeError):
                await self._send(msg)

    def close(self) -> None:
        self.closed = True
        for cancel in self.subscriptions.values():
            cancel()
        self.subscriptions.clear()


class Stream:
    """The notifications of one subscription."""

    def __init__(self, conn: Connection, method: str, sub_id: str) -> None:
        self.conn, self.method, self.id = conn, method, sub_id
        self._held: list[bytes] | None = []

    def send(self, result: Any) -> None:
        msg = orjson.dumps(
            {
                "jsonrpc": "2.0",
                "method": self.method,
                "params": {"subscription": self.id, "result": result},
            }
        )
        if self._held is None:
            self.conn.queue(msg)
        else:
            self._held.append(msg)

    def open(self) -> None:
        held, self._held = self._held or [], None
        for msg in held:
            self.conn.queue(msg)


Handler = Callable[[list[Any], Connection], Any]


class RpcServer:
    def __init__(
        self,
        methods: dict[str, Handler],
        unsafe: set[str],
        allow_unsafe: bool,
        max_request: int,
        cors: list[str] | None,
    ) -> None:
        self.methods, self.unsafe, self.allow_unsafe = methods, unsafe, allow_unsafe
        self.max_request = max_request
        self.cors = cors  # None: any origin (--rpc-cors all)
        self.connections: set[Connection] = set()
        self.sockets: set[web.WebSocketResponse] = set()

    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.max_request + 1024)
        app.router.add_route("*", "/", self._handle)
        app.on_shutdown.append(self._close_sockets)
        return app

    async def _close_sockets(self, _app: web.Application) -> None:
        # A stopping node tells its WebSocket clients it is going away, as Substrate's does;
        # otherwise aiohttp waits its whole shutdown timeout for every subscriber (indexer,
        # gateway, worker) to hang up first, and a reset's stop-nodes phase waits with it.
        for ws in list(self.sockets):
            await ws.close(code=WSCloseCode.GOING_AWAY, message=b"node shutting down")

    def _origin_ok(self, request: web.Request) -> bool:
        origin = request.headers.get("Origin")
        if origin is None or self.cors is None:
            return True
        # Substrate's defaults allow http(s)://localhost and 127.0.0.1 on any port.
        bare = origin.rsplit(":", 1)[0] if origin.count(":") == 2 else origin
        return origin in self.cors or bare in self.cors

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if not self._origin_ok(request):
            return web.Response(
                status=403, text="Origin of the request is not allowed (--rpc-cors)"
            )
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return await self._websocket(request)
        if request.method == "GET":
            return web.Response(
                text="Used HTTP Method is not allowed. POST is required\n", status=405
            )
        if request.method != "POST":
            return web.Response(status=405)
        if request.content_length is not None and request.content_length > self.max_request:
            return self._json(_error(None, RpcError(-32007, "Request is too big")), status=413)
        try:
            body = await request.content.read(self.max_request + 1)
        except (asyncio.CancelledError, ConnectionError):
            raise
        if len(body) > self.max_request:
            return self._json(_error(None, RpcError(-32007, "Request is too big")), status=413)
        reply = await self.process(body, Connection(None))
        return self._json(reply) if reply is not None else web.Response(status=200)

    def _json(self, reply: Any, status: int = 200) -> web.Response:
        return web.Response(
            body=orjson.dumps(reply), status=status, content_type="application/json"
        )

    async def _websocket(self, request: web.Request) -> web.WebSocketResponse:
        # No server pings: substrate-interface answers a ping only while it reads, so a client
        # idling between calls would be dropped by a pong timeout.
        ws = web.WebSocketResponse(max_msg_size=4 * self.max_request)
        await ws.prepare(request)
        conn = Connection(
            lambda b: ws.send_str(b.decode()),
            lambda: ws.close(
                code=WSCloseCode.POLICY_VIOLATION, message=b"too many unread messages"
            ),
        )
        pump = asyncio.create_task(conn.pump())
        self.connections.add(conn)
        self.sockets.add(ws)
        try:
            async for msg in ws:
                if msg.type in (WSMsgType.TEXT, WSMsgType.BINARY):
                    data = msg.data.encode() if isinstance(msg.data, str) else msg.data
                    if len(data) > self.max_request:
                        reply: Any = _error(None, RpcError(-32007, "Request is too big"))
                    else:
                        reply = await self.process(data, conn)
                    await conn.reply(orjson.dumps(reply) if reply is not None else None)
                elif msg.type == WSMsgType.ERROR:
                    break
        finally:
            conn.close()
            pump.cancel()
            self.connections.discard(conn)
            self.sockets.discard(ws)
        return ws

    async def process(self, body: bytes, conn: Connection) -> Any:
        try:
            req = orjson.loads(body)
        except orjson.JSONDecodeError:
            return _error(None, RpcError(-32700, "Parse error"))
        if isinstance(req, list):
            if not req:
                return _error(None, RpcError(-32600, "Invalid request"))
            replies = [await self.call(r, conn) for r in req]
            return [r for r in replies if r is not None]
        return await self.call(req, conn)

    async def call(self, req: Any, conn: Connection) -> Any:
        if (
            not isinstance(req, dict)
            or req.get("jsonrpc") != "2.0"
            or not isinstance(req.get("method"), str)
        ):
            rid = req.get("id") if isinstance(req, dict) else None
            return _error(rid, RpcError(-32600, "Invalid request"))
        rid = req.get("id")
        method = req["method"]
        params = req.get("params", [])
        if params is None:
            params = []
        handler = self.methods.get(method)
        try:
            if handler is None:
                raise RpcError(-32601, "Method not found")
            if method in self.unsafe and not self.allow_unsafe:
                raise RpcError(-32601, "RPC call is unsafe to be called externally")
            if isinstance(params, dict):
                raise invalid_params("named parameters are not supported; pass an array")
            if not isinstance(params, list):
                raise invalid_params("params must be an array")
            result = handler(params, conn)
            if asyncio.iscoroutine(result):
                result = await result
        except RpcError as exc:
            return _error(rid, exc) if "id" in req else None
        except Exception:
            log.exception("RPC method %s failed", method)
            return _error(rid, RpcError(-32603, "Internal error"))
        if "id" not in req:
            return None  # a notification gets no reply
        return {"jsonrpc": "2.0", "result": result, "id": rid}


def _error(rid: Any, exc: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "error": exc.to_json(), "id": rid}

"""Subscribers that stop reading: every message to a subscriber has a bounded time to be sent.

A WebSocket send waits while the connection's write buffer is full, and it stays full for as
long as the client does not read: without a bound, a client that subscribes and stops reading
holds its subscriptions (the per-connection and per-address slots) for ever, and the server
keeps the connection and its buffers. Here a message not sent within ``send_timeout_s`` drops
the subscriber: its connection is closed with ``SLOW_CONSUMER_CLOSE``, or, when the close frame
cannot be sent either (the buffer is still full), aborted (a TCP reset), and its subscriptions
end, which frees their slots.

Aborting needs the connection's transport, which ASGI does not expose: ``TransportAbort`` (the
app's outermost middleware) finds it behind the server's ``send`` (uvicorn's protocol) and
leaves its ``abort`` in the scope. Under another server there is none, and a dropped
subscriber's connection is only closed, but its subscriptions end all the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import struct
from typing import TYPE_CHECKING, Any

from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect
from strawberry.http.exceptions import WebSocketDisconnected
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
)

from ops_tools.services.common.clientip import Network, client_ip

if TYPE_CHECKING:
    from collections.abc import Sequence

log = logging.getLogger(__name__)

#: The WebSocket close code of a subscriber too slow to keep up (an application code: 4000+).
SLOW_CONSUMER_CLOSE = 4419
#: Scope keys: the connection's transport's ``abort``, and whether it was dropped.
ABORT_KEY = "net.transport_abort"
DROPPED_KEY = "net.dropped"


class TransportAbort:
    """ASGI middleware: a WebSocket's scope gets its transport's ``abort`` (uvicorn's ``send``
    is a method of its protocol, which holds the transport)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            transport = getattr(getattr(send, "__self__", None), "transport", None)
            # asyncio's or uvloop's (which does not subclass asyncio.Transport)
            if callable(getattr(transport, "abort", None)):
                scope[ABORT_KEY] = functools.partial(_reset, transport)
        await self.app(scope, receive, send)


def _reset(transport: Any) -> None:
    """Abort with a TCP reset: a plain close would leave the unsent buffer, and a FIN behind
    it, to the kernel for as long as the client does not read (an orphaned socket)."""
    sock = transport.get_extra_info("socket")
    with contextlib.suppress(OSError):  # a socket already closed (asyncio's)
        # uvloop's socket object keeps the descriptor's number after the transport has let it
        # go, and by then the number may be another connection's: touch this connection only.
        if sock is not None and sock.getpeername() == transport.get_extra_info("peername"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def peer(ws: WebSocket, trusted_proxies: Sequence[Network]) -> str:
    """The client's address, as the subscription limits count it (behind one of the trusted
    proxies, from X-Forwarded-For)."""
    if not ws.client:
        return "unknown"
    return client_ip(ws.client.host, ws.headers.getlist("x-forwarded-for"), trusted_proxies)


def dropped(ws: WebSocket) -> bool:
    return bool(ws.scope.get(DROPPED_KEY))


async def drop(ws: WebSocket, reason: str, grace_s: float, address: str) -> None:
    """Close ``ws`` with ``SLOW_CONSUMER_CLOSE`` and ``reason``; abort it when the close frame
    is not sent within ``grace_s``, or when the client has not completed the closing handshake
    ``grace_s`` after it was. Once per connection; the subscriptions' receive loop then ends,
    and with it every subscription of the connection."""
    if dropped(ws):
        return
    ws.scope[DROPPED_KEY] = True
    abort = ws.scope.get(ABORT_KEY)
    try:
        async with asyncio.timeout(grace_s):
            await ws.close(code=SLOW_CONSUMER_CLOSE, reason=reason)
        sent = True
    except (TimeoutError, WebSocketDisconnect, RuntimeError, OSError):
        sent = False
    log.warning("indexer: subscriber %s dropped (%s): %s", address, reason,
                f"closed with {SLOW_CONSUMER_CLOSE}" if sent else
                "the close frame could not be sent either, connection aborted"
                if abort else "the close frame could not be sent either")
    if abort is None:
        return
    if sent:
        # A client that reads no more does not answer the close either: the server would
        # otherwise keep the connection, and its unsent buffer, until the peer goes away.
        asyncio.get_running_loop().call_later(grace_s, abort)
    else:
        abort()


class BoundedSendHandler(BaseGraphQLTransportWSHandler[Any, Any]):
    """graphql-transport-ws whose every message has ``send_timeout_s`` to be sent (taken from
    the connection's context: ``context["indexer"].subscribers``)."""

    def _socket(self) -> WebSocket:
        return self.websocket.ws  # type: ignore[attr-defined,no-any-return]

    async def send_message(self, message: Any) -> None:
        ws = self._socket()
        if dropped(ws):
            raise WebSocketDisconnected
        subs = self.context["indexer"].subscribers
        try:
            async with asyncio.timeout(subs.send_timeout_s):
                await super().send_message(message)
        except TimeoutError:
            await drop(ws, f"a message not sent within {subs.send_timeout_s:g} s",
                       subs.send_timeout_s, peer(ws, subs.trusted_proxies))
            raise WebSocketDisconnected from None

    async def handle_task_exception(self, error: Exception) -> None:
        # A subscription whose connection was dropped ends by its send failing: logged once,
        # by drop(), not once more per subscription with a traceback.
        # (A send that was waiting when the close frame went out fails with RuntimeError.)
        if isinstance(error, (WebSocketDisconnected, RuntimeError, OSError)) and dropped(
                self._socket()):
            return
        await super().handle_task_exception(error)

"""Streamed responses as plain ASGI: they notice a client that goes away, and their clean-up is
their own ``finally``.

Starlette's ``StreamingResponse`` runs the body generator in a task group beside a disconnect
listener; a client gone before the first chunk cancelled the generator before it started, so the
generator's ``finally`` (release the budget reservation and the worker's slot, close the worker's
request) never ran. Here whatever the response holds is released by the response itself, once,
however it ends, and a disconnect cancels the relay at once, so the upstream request is closed and
the engine stops generating for nobody.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class DisconnectWatch:
    """Cancels the task that made it when the client disconnects, until ``close()``.

    After the request body was read, the server's ``receive()`` answers only
    ``http.disconnect``: when the client goes away, or when the response is complete (hence
    ``close()`` before the last ``send``). One future per response, nothing per chunk.
    """

    def __init__(self, receive: Receive) -> None:
        self.disconnected = False
        self._task = asyncio.current_task()
        self._closed = False
        self._waiter = asyncio.ensure_future(receive())
        self._waiter.add_done_callback(self._seen)

    def _seen(self, fut: asyncio.Future[Message]) -> None:
        if self._closed or fut.cancelled() or fut.exception() is not None:
            return
        if fut.result().get("type") == "http.disconnect" and self._task is not None:
            self.disconnected = True
            self._task.cancel()

    def follow(self) -> None:
        """Cancel the current task from now on (the response may run in another task than the
        handler that made the watch)."""
        self._task = asyncio.current_task()

    def absorb(self) -> bool:
        """In an ``except CancelledError``: True (and the cancellation undone) when it was this
        watch's, i.e. the client went away; False when the task is really being cancelled."""
        if not self.disconnected or self._task is None:
            return False
        self._task.uncancel()
        return True

    def close(self) -> None:
        self._closed = True
        self._waiter.cancel()


def start_message(status: int, headers: list[tuple[bytes, bytes]]) -> Message:
    return {"type": "http.response.start", "status": status, "headers": headers}


def body_message(body: bytes, more: bool) -> Message:
    return {"type": "http.response.body", "body": body, "more_body": more}


class PassThrough:
    """Relay an upstream byte stream chunk by chunk as it arrives (no re-encoding); ``close``
    runs exactly once, however the response ends (the worker's hop)."""

    def __init__(self, chunks: AsyncIterator[bytes], status: int,
                 headers: list[tuple[bytes, bytes]], close: Callable[[], Any],
                 watch: DisconnectWatch | None = None) -> None:
        self.chunks, self.status, self.headers, self.close = chunks, status, headers, close
        self.watch = watch

    async def __call__(self, scope: Any, receive: Receive, send: Send) -> None:
        watch = self.watch or DisconnectWatch(receive)
        watch.follow()
        try:
            await send(start_message(self.status, self.headers))
            async for chunk in self.chunks:
                if chunk:
                    await send(body_message(chunk, True))
            watch.close()
            await send(body_message(b"", False))
        except asyncio.CancelledError:
            if not watch.absorb():
                raise
        finally:
            watch.close()
            result = self.close()
            if asyncio.iscoroutine(result):
                await result

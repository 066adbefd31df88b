"""Stopping gracefully: on SIGTERM (``docker stop``, ``systemctl stop``) the worker stops
announcing and heartbeating, refuses new requests (503, which the gateway retries on another
worker before the first byte) and lets the requests in flight finish (a stream runs to its
end), then exits. A second signal, or ``drain_timeout_s``, cuts the drain short."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Awaitable, Callable
from types import FrameType
from typing import Any

import uvicorn

log = logging.getLogger("net.worker")

INFERENCE_PATHS = frozenset({"/v1/chat/completions", "/v1/completions", "/v1/embeddings"})
DRAINING = "draining: the worker is stopping"


class Drain:
    """The worker's requests in flight, counted at the ASGI edge (a streamed answer counts until
    its last byte is sent), and whether the worker is draining."""

    def __init__(self) -> None:
        self.inflight = 0
        self.draining = False
        self._idle = asyncio.Event()
        self._idle.set()

    def wrap(self, app: Any) -> Any:
        async def counted(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http" or scope["path"] not in INFERENCE_PATHS:
                await app(scope, receive, send)
                return
            self.inflight += 1
            self._idle.clear()
            try:
                await app(scope, receive, send)
            finally:
                self.inflight -= 1
                if self.inflight == 0:
                    self._idle.set()

        return counted

    async def wait_idle(self, timeout_s: float) -> bool:
        """True when no request is in flight any more; False when ``timeout_s`` ran out."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except TimeoutError:
            return False
        return True


class DrainingServer(uvicorn.Server):
    """uvicorn, whose first SIGTERM or SIGINT drains before it shuts down (uvicorn's own
    shutdown closes the listener and waits only ``timeout_graceful_shutdown`` for what runs)."""

    def __init__(self, config: uvicorn.Config, drain: Drain, timeout_s: float,
                 on_drain: Callable[[], Awaitable[Any]] | None = None) -> None:
        super().__init__(config)
        self.drain = drain
        self.timeout_s = timeout_s
        self.on_drain = on_drain
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None

    async def serve(self, sockets: Any = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.drain.draining or self._loop is None or sig not in (signal.SIGTERM,
                                                                   signal.SIGINT):
            # A second signal: stop now, whatever still runs.
            self.should_exit = True
            self.force_exit = self.drain.draining
            return
        self.drain.draining = True
        self._loop.call_soon_threadsafe(self._start)

    def _start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        started = time.monotonic()
        log.info("draining: %d request(s) in flight; no more announcements",
                 self.drain.inflight)
        try:
            if self.on_drain is not None:
                await self.on_drain()
        except Exception as exc:  # stopping must go on
            log.warning("draining: stopping the liveness duties failed: %s", exc)
        remaining = max(0.0, self.timeout_s - (time.monotonic() - started))
        if await self.drain.wait_idle(remaining):
            log.info("drained in %.1f s; stopping", time.monotonic() - started)
        else:
            log.warning("drain timeout (%g s) with %d request(s) still in flight; stopping",
                        self.timeout_s, self.drain.inflight)
        self.should_exit = True

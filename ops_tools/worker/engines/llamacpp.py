"""llama.cpp: the C++ ``llama-server`` or ``llama-cpp-python``'s server (``python -m
llama_cpp.server``, what the local network runs).

``llama-server`` answers ``/health`` 503 while it loads the model and 200 after; it publishes load
at ``/metrics`` with ``--metrics`` (``llamacpp:requests_processing``,
``llamacpp:requests_deferred``) and per slot at ``/slots``. ``llama-cpp-python``'s server has
none of those (404): it is ready when it lists its model, and its load is what this worker has in
flight to it (it answers one request at a time and queues the others behind a lock). Errors:
``{"error": {"code", "message", "type"}}`` from ``llama-server``, FastAPI's ``{"detail"}`` from
the Python server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson

from ops_tools.worker.engines.base import Answer, EngineLoad, HttpEngine


class LlamaCppEngine(HttpEngine):
    kind = "llamacpp"
    name = "llama.cpp"

    def __init__(self, base_url: str) -> None:
        super().__init__(base_url)
        self.inflight = 0

    async def ready(self) -> str | None:
        try:
            status, _ = await self._get("/health")
        except Exception as exc:
            return f"the llamacpp engine does not answer /health: {type(exc).__name__}"
        if status == 404:  # llama-cpp-python's server: no /health
            return await super().ready()
        return None if status == 200 else f"the llamacpp engine's /health answers {status}"

    async def load(self) -> EngineLoad | None:
        measured = await self._prometheus_load("llamacpp:requests_processing",
                                               "llamacpp:requests_deferred")
        if measured is not None:
            return measured
        status, raw = await self._get("/slots")
        if status == 200:
            slots = orjson.loads(raw)
            if isinstance(slots, list):
                busy = sum(1 for s in slots if isinstance(s, dict) and s.get("is_processing"))
                return EngineLoad(busy, 0)
        # One request runs at a time; the rest wait for it.
        return EngineLoad(min(self.inflight, 1), max(self.inflight - 1, 0))

    async def answer(self, path: str, raw: bytes) -> Answer:
        self.inflight += 1
        try:
            answer = await super().answer(path, raw)
        except BaseException:
            self.inflight -= 1
            raise
        if answer.stream is None:
            self.inflight -= 1
            return answer
        answer.stream = self._counted(answer.stream)
        return answer

    async def _counted(self, stream: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        try:
            async for piece in stream:
                yield piece
        finally:
            self.inflight -= 1

"""The built-in TEST ENGINE in-process (ops_tools/worker/test_engine.py): no weights, no GPU;
its load is the requests it is answering right now."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson

from ops_tools.worker import test_engine
from ops_tools.worker.engines.base import Answer, EngineLoad


class TestEngine:
    kind = "test"
    name = test_engine.TEST_ENGINE_NAME

    def __init__(self, models: list[str], token_delay_ms: int = 0) -> None:
        self._models = models or list(test_engine.DEFAULT_MODELS)
        self.delay = token_delay_ms / 1000
        self.running = 0

    async def models(self) -> list[str]:
        return list(self._models)

    async def ready(self) -> str | None:
        return None

    async def load(self) -> EngineLoad | None:
        return EngineLoad(self.running, 0)

    async def answer(self, path: str, raw: bytes) -> Answer:
        body = orjson.loads(raw)
        if body.get("model") not in self._models:
            error = {"error": {"message": f"The model `{body.get('model')}` does not exist.",
                               "type": "invalid_request_error", "param": "model",
                               "code": "model_not_found"}}
            return Answer(404, orjson.dumps(error))
        if path == "/v1/embeddings":
            return Answer(200, orjson.dumps(test_engine.embed(body)))
        kind = "chat" if path == "/v1/chat/completions" else "text"
        if not body.get("stream"):
            return Answer(200, orjson.dumps(test_engine.complete(kind, body)))
        return Answer(200, stream=self._sse(kind, body))

    async def _sse(self, kind: str, body: dict[str, Any]) -> AsyncIterator[bytes]:
        self.running += 1
        try:
            for chunk in test_engine.stream(kind, body):
                if self.delay:
                    await asyncio.sleep(self.delay)
                yield b"data: " + orjson.dumps(chunk) + b"\n\n"
            yield b"data: [DONE]\n\n"
        finally:
            self.running -= 1

    async def aclose(self) -> None:
        return None

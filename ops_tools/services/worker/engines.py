"""Where a worker's requests go: the built-in TEST ENGINE, or an OpenAI-compatible engine."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson

from ops_tools.services.worker import test_engine


class Answer:
    """Either a whole JSON body or an SSE byte stream, with the status to send."""

    def __init__(
        self, status: int, body: bytes | None = None, stream: AsyncIterator[bytes] | None = None,
        close: Any = None,
    ) -> None:
        self.status, self.body, self.stream, self.close = status, body, stream, close


class TestEngine:
    name = test_engine.TEST_ENGINE_NAME

    def __init__(self, models: list[str], token_delay_ms: int = 0) -> None:
        self._models = models or list(test_engine.DEFAULT_MODELS)
        self.delay = token_delay_ms / 1000

    async def models(self) -> list[str]:
        return list(self._models)

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
        for chunk in test_engine.stream(kind, body):
            if self.delay:
                await asyncio.sleep(self.delay)
            yield b"data: " + orjson.dumps(chunk) + b"\n\n"
        yield b"data: [DONE]\n\n"

    async def aclose(self) -> None:
        return None


class HttpEngine:
    """An engine process that speaks the OpenAI API; bodies and streams pass through as bytes."""

    name = "openai-compatible"

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(600.0, connect=3.0),
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
        )

    async def models(self) -> list[str]:
        response = await self.client.get(self.base_url + "/v1/models")
        response.raise_for_status()
        return [m["id"] for m in response.json().get("data", [])]

    async def answer(self, path: str, raw: bytes) -> Answer:
        request = self.client.build_request(
            "POST", self.base_url + path, content=raw,
            headers={"Content-Type": "application/json"},
        )
        response = await self.client.send(request, stream=True)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return Answer(response.status_code, stream=response.aiter_raw(),
                          close=response.aclose)
        body = await response.aread()
        await response.aclose()
        return Answer(response.status_code, body)

    async def aclose(self) -> None:
        await self.client.aclose()

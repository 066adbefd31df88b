"""Where a worker's requests go: the built-in TEST ENGINE, or an OpenAI-compatible engine."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson

from ops_tools.worker import test_engine


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
    """An engine process that speaks the OpenAI API; bodies and streams pass through as bytes,
    over one long-lived keep-alive connection pool (aiohttp: the worker hop's per-request cost
    is mostly the HTTP client's, and aiohttp's is a fraction of httpx's)."""

    name = "openai-compatible"

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self._client: aiohttp.ClientSession | None = None

    @property
    def client(self) -> aiohttp.ClientSession:
        if self._client is None:  # made on first use: aiohttp binds it to the running loop
            self._client = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=1000, limit_per_host=0,
                                               keepalive_timeout=60),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=3.0, sock_read=600.0),
                auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar(),
                skip_auto_headers=("User-Agent",),
            )
        return self._client

    async def models(self) -> list[str]:
        async with self.client.get(self.base_url + "/v1/models") as response:
            response.raise_for_status()
            doc = orjson.loads(await response.read())
        return [m["id"] for m in doc.get("data", [])]

    async def answer(self, path: str, raw: bytes) -> Answer:
        response = await self.client.post(self.base_url + path, data=raw,
                                          headers={"Content-Type": "application/json"})
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return Answer(response.status, stream=response.content.iter_any(),
                          close=response.close)
        try:
            body = await response.read()
        finally:
            response.release()
        return Answer(response.status, body)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()

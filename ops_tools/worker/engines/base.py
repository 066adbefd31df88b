"""What every engine adapter shares: the answer type, the load it reports, and the HTTP
pass-through that the dialects specialise (readiness, load, error bodies)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

# An engine's own answers are read whole only when small: health, metrics, model lists, errors.
MAX_SIDE_BODY = 1 << 20
# A whole (non-streamed) answer: far over any completion or embeddings batch, and the gateway
# bounds what it takes from the worker far lower (upstream_max_body_bytes).
MAX_ANSWER_BODY = 64 << 20
PROBE_TIMEOUT = aiohttp.ClientTimeout(total=3.0)
# How long an idle connection to the engine stays in the worker's pool: shorter than the engine
# keeps it (uvicorn-based engines, vLLM and SGLang among them, close one after 5 s; llama.cpp's
# server too), so the worker always closes first and never sends a request on a connection the
# engine is closing (that request would fail: a worker failure to the gateway).
ENGINE_KEEPALIVE_S = 4.0
# How long a connection to the engine may take to open. On the engine's own host a connect is
# taken or refused at once; one that times out is an engine whose accept queue is full, or this
# worker's own event loop held off a busy processor past the deadline (the connect was made, the
# timer fired first). Nothing was sent: it is tried once more before the request fails.
ENGINE_CONNECT_S = 3.0
ENGINE_CONNECT_ATTEMPTS = 2


class BodyTooLarge(Exception):
    """An engine's answer went over the worker's bound for it."""


async def read_whole(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The whole body, read to its end, or ``BodyTooLarge`` once it passes ``limit`` bytes.

    Not ``response.content.read(limit)``: that returns only what has arrived so far, so an
    answer longer than what came first was cut short and relayed as if whole (a 2 MiB answer as
    its first 128 KiB; a busy engine's as its first few KiB, under any bound)."""
    length = response.content_length
    if length is not None and length > limit:
        raise BodyTooLarge(f"the engine's answer is {length} bytes; the limit is {limit}")
    parts, size = [], 0
    async for chunk in response.content.iter_any():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"the engine's answer passed the limit of {limit} bytes")
        parts.append(chunk)
    return b"".join(parts)


class Answer:
    """Either a whole JSON body or an SSE byte stream, with the status to send."""

    def __init__(
        self, status: int, body: bytes | None = None, stream: AsyncIterator[bytes] | None = None,
        close: Any = None,
    ) -> None:
        self.status, self.body, self.stream, self.close = status, body, stream, close


@dataclass(frozen=True)
class EngineLoad:
    """Requests the engine is generating for and those it queued (its own numbers)."""

    running: int
    waiting: int

    def as_dict(self) -> dict[str, int]:
        return {"running": self.running, "waiting": self.waiting}


def prometheus_gauges(text: str, names: tuple[str, ...]) -> dict[str, float]:
    """The sum over label sets of each gauge in ``names`` found in Prometheus text format."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        name = head.split("{", 1)[0].strip()
        if name in names:
            try:
                number = float(value)
            except ValueError:
                continue
            if math.isfinite(number):
                found[name] = found.get(name, 0.0) + number
    return found


def openai_error(status: int, message: str, kind: str, code: Any = None) -> bytes:
    return orjson.dumps({"error": {"message": message[:2000], "type": kind, "param": None,
                                   "code": code}})


def normalise_error(status: int, raw: bytes) -> bytes:
    """Any engine's error body in the OpenAI shape ``{"error": {message, type, param, code}}``.

    vLLM, SGLang and TensorRT-LLM answer ``{"object": "error", "message", "type", "code"}``;
    llama.cpp ``{"error": {"code", "message", "type"}}``; FastAPI-based servers
    ``{"detail": ...}``; a proxy in front may answer HTML."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        doc = None
    kind = "invalid_request_error" if status < 500 else "server_error"
    if isinstance(doc, dict):
        inner = doc.get("error")
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return openai_error(status, inner["message"], str(inner.get("type") or kind),
                                inner.get("code"))
        if isinstance(inner, str):
            return openai_error(status, inner, kind)
        if isinstance(doc.get("message"), str):
            return openai_error(status, doc["message"], str(doc.get("type") or kind),
                                doc.get("code"))
        if "detail" in doc:
            detail = doc["detail"]
            text = detail if isinstance(detail, str) else orjson.dumps(detail).decode()
            return openai_error(status, text, kind)
    text = raw[:300].decode("utf-8", "replace").strip() or f"the engine answered {status}"
    return openai_error(status, text, kind)


class HttpEngine:
    """An engine process that speaks the OpenAI API; bodies and streams pass through as bytes,
    over one long-lived keep-alive connection pool (aiohttp: the worker hop's per-request cost
    is mostly the HTTP client's, and aiohttp's is a fraction of httpx's).

    A dialect sets ``kind`` and overrides ``ready`` and ``load``."""

    kind = "openai"
    name = "openai-compatible"

    def __init__(self, base_url: str, keepalive_s: float = ENGINE_KEEPALIVE_S) -> None:
        self.base_url = base_url.rstrip("/")
        self.keepalive_s = keepalive_s
        self._client: aiohttp.ClientSession | None = None

    @property
    def client(self) -> aiohttp.ClientSession:
        if self._client is None:  # made on first use: aiohttp binds it to the running loop
            self._client = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=1000, limit_per_host=0,
                                               keepalive_timeout=self.keepalive_s),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=ENGINE_CONNECT_S,
                                              sock_read=600.0),
                auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar(),
                skip_auto_headers=("User-Agent",),
            )
        return self._client

    async def _get(self, path: str) -> tuple[int, bytes]:
        async with self.client.get(self.base_url + path, timeout=PROBE_TIMEOUT) as response:
            return response.status, await read_whole(response, MAX_SIDE_BODY)

    async def _get_json(self, path: str) -> Any:
        status, raw = await self._get(path)
        if status != 200:
            raise RuntimeError(f"{self.kind} engine {path}: {status}")
        return orjson.loads(raw)

    async def models(self) -> list[str]:
        doc = await self._get_json("/v1/models")
        data = doc.get("data") if isinstance(doc, dict) else None
        return [m["id"] for m in data or [] if isinstance(m, dict) and isinstance(m.get("id"), str)]

    async def ready(self) -> str | None:
        """None when the engine takes requests, else why not (a generic server: it lists its
        models)."""
        try:
            names = await self.models()
        except Exception as exc:
            return f"the engine does not answer /v1/models: {type(exc).__name__}"
        return None if names else "the engine lists no model"

    async def _health(self, path: str) -> str | None:
        try:
            status, _ = await self._get(path)
        except Exception as exc:
            return f"the {self.kind} engine does not answer {path}: {type(exc).__name__}"
        return None if status == 200 else f"the {self.kind} engine's {path} answers {status}"

    async def load(self) -> EngineLoad | None:
        """The engine's own running/waiting counts; None when it does not publish them."""
        return None

    async def _prometheus_load(self, running: str, waiting: str) -> EngineLoad | None:
        status, raw = await self._get("/metrics")
        if status != 200:
            return None
        gauges = prometheus_gauges(raw.decode("utf-8", "replace"), (running, waiting))
        if running not in gauges:
            return None
        return EngineLoad(int(gauges[running]), int(gauges.get(waiting, 0)))

    def prepare(self, path: str, body: bytes) -> bytes:
        """The request as this dialect needs it (the default: unchanged)."""
        return body

    async def _post(self, path: str, data: bytes) -> aiohttp.ClientResponse:
        def post() -> Any:
            return self.client.post(self.base_url + path, data=data,
                                    headers={"Content-Type": "application/json"})

        for _ in range(ENGINE_CONNECT_ATTEMPTS - 1):
            with contextlib.suppress(aiohttp.ConnectionTimeoutError):
                return await post()  # type: ignore[no-any-return]
        return await post()  # type: ignore[no-any-return]

    async def answer(self, path: str, raw: bytes) -> Answer:
        try:
            response = await self._post(path, self.prepare(path, raw))
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            # The gateway takes a 5xx for a failed worker and asks another one.
            return Answer(502, openai_error(
                502, f"the {self.kind} engine at {self.base_url} cannot be reached"
                f" ({type(exc).__name__})", "server_error", "engine_unreachable"))
        if response.status == 200 and response.headers.get("content-type", "").startswith(
                "text/event-stream"):
            return Answer(response.status, stream=response.content.iter_any(),
                          close=response.close)
        try:
            body = await read_whole(response, MAX_ANSWER_BODY)
        except BodyTooLarge as exc:
            response.close()  # the rest is not read: the connection is not reused
            return Answer(502, openai_error(502, str(exc), "server_error",
                                            "engine_answer_too_large"))
        except BaseException:
            response.close()
            raise
        response.release()
        if response.status >= 400:
            body = normalise_error(response.status, body)
        return Answer(response.status, body)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()

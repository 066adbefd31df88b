"""The worker's HTTP side: the gateway's requests forwarded to the engine.

An inference request must carry this worker's own token, the one the gateway returned to its
latest accepted announcement (ops_tools/chain/wire/worker_token.py): no other worker's token,
nor anything an announced endpoint has seen, opens this one."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ops_tools.asgi_stream import DisconnectWatch, PassThrough
from ops_tools.worker.drain import DRAINING, Drain
from ops_tools.worker.engines import EngineFront

JSON = "application/json"
CLIENT_CLOSED = 499
SSE_HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"),
               (b"cache-control", b"no-cache")]


def _nothing() -> None:
    return None


def _error(status: int, message: str, code: str) -> Response:
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None,
                      "code": code}}
    return Response(orjson.dumps(body), status, media_type=JSON)


def build_app(
    engine: EngineFront,
    token: Callable[[], str | None] | None,
    *,
    on_start: Callable[[], Awaitable[Any]] | None = None,
    on_stop: Callable[[], Awaitable[Any]] | None = None,
    status: Callable[[], dict[str, Any]] | None = None,
    ready: Callable[[], str | None] | None = None,
    drain: Drain | None = None,
) -> Starlette:
    """``token``: this worker's current gateway token (None until the gateway admitted it);
    ``token`` None: no authentication (the test engine served as a stand-alone engine).
    ``drain``: while it drains, new requests, ``/health`` and ``/ready`` answer 503 (the
    gateway retries elsewhere and stops routing here); wrap the app with ``drain.wrap`` to
    count the requests in flight."""

    def draining() -> Response | None:
        if drain is None or not drain.draining:
            return None
        body = {"error": {"message": DRAINING, "type": "server_error", "param": None,
                          "code": "draining"}}
        return Response(orjson.dumps(body), 503, headers={"Retry-After": "2"},
                        media_type=JSON)

    async def inference(request: Request) -> Response:
        refused = draining()
        if refused is not None:
            return refused
        if token is not None:
            current = token()
            given = request.headers.get("authorization", "").encode()
            if current is None or not hmac.compare_digest(given, f"Bearer {current}".encode()):
                return _error(401, "requests to this worker come only from the gateway, with"
                              " this worker's own token", "invalid_api_key")
        raw = await request.body()
        # The gateway hangs up when its client went away: stop waiting for the engine then.
        watch = DisconnectWatch(request.receive)
        try:
            answer = await engine.answer(request.url.path, raw)
        except orjson.JSONDecodeError:
            watch.close()
            return _error(400, "the body must be JSON", "invalid_json")
        except asyncio.CancelledError:
            watch.close()
            if not watch.absorb():
                raise
            return Response(b"", CLIENT_CLOSED)
        except BaseException:
            watch.close()
            raise
        if answer.stream is None:
            watch.close()
            return Response(answer.body, answer.status, media_type=JSON)
        # Chunk by chunk as the engine sends them; a gateway that hangs up closes the engine's
        # request, so the engine stops generating.
        return PassThrough(answer.stream, answer.status, SSE_HEADERS,  # type: ignore[return-value]
                           answer.close or _nothing, watch)

    async def models(request: Request) -> Response:
        names = await engine.models()
        data = [{"id": m, "object": "model", "created": 0, "owned_by": engine.name}
                for m in names]
        return Response(orjson.dumps({"object": "list", "data": data}), media_type=JSON)

    async def health(request: Request) -> Response:
        """The gateway's health check reads ``engine_load`` here and routes by it (within the
        bounds it sets: it is this worker's claim)."""
        refused = draining()
        if refused is not None:
            return refused
        body: dict[str, Any] = {"status": "ok", "engine": engine.name,
                                "engine_kind": engine.kind, **(status() if status else {})}
        try:
            load = await engine.load()
        except Exception:
            load = None
        if load is not None:
            body["engine_load"] = load.as_dict()
        return Response(orjson.dumps(body), media_type=JSON)

    async def is_ready(request: Request) -> Response:
        """200 once the engine answers and the liveness duties (announce, heartbeats) went
        through; 503 with the reason and ``Retry-After`` otherwise."""
        problem = DRAINING if drain is not None and drain.draining else None
        problem = problem or (ready() if ready else None)
        if problem is None:
            problem = await engine.ready()
        if problem is not None:
            body = {"error": {"code": "not_ready", "message": problem}}
            return Response(orjson.dumps(body), 503, headers={"Retry-After": "2"},
                            media_type=JSON)
        return Response(orjson.dumps({"ready": True}), media_type=JSON)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        if on_start is not None:
            await on_start()
        try:
            yield
        finally:
            if on_stop is not None:
                await on_stop()
            await engine.aclose()

    return Starlette(
        routes=[
            Route("/v1/chat/completions", inference, methods=["POST"]),
            Route("/v1/completions", inference, methods=["POST"]),
            Route("/v1/embeddings", inference, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
            Route("/ready", is_ready, methods=["GET"]),
        ],
        lifespan=lifespan,
    )

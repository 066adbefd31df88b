"""The gateway's ASGI application and its console script ``net-gateway``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ops_tools.services.gateway import openai_errors as oe
from ops_tools.services.gateway.api import TEST_MODE_HEADER, GatewayApi, error_response
from ops_tools.services.gateway.service import GatewayState

TEST_MODE = (TEST_MODE_HEADER.lower().encode(), b"true")


class TestModeHeader:
    """Every response says the gateway runs in test mode (raw ASGI: no per-request objects)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), TEST_MODE]
            await send(message)

        await self.app(scope, receive, send_with_header)


def routes(api: GatewayApi) -> list[Route]:
    return [
        Route("/v1/chat/completions", api.inference, methods=["POST"]),
        Route("/v1/completions", api.inference, methods=["POST"]),
        Route("/v1/embeddings", api.inference, methods=["POST"]),
        Route("/v1/models", api.models, methods=["GET"]),
        Route("/v1/usage", api.usage, methods=["GET"]),
        Route("/v1/workers/announce", api.announce, methods=["POST"]),
        Route("/v1/workers/heartbeat", api.heartbeat, methods=["POST"]),
        Route("/v1/workers", api.workers, methods=["GET"]),
    ]


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        err = oe.OpenAIError(404, f"Unknown request URL: {request.method} {request.url.path}.",
                             code="unknown_url")
    elif exc.status_code == 405:
        err = oe.OpenAIError(405, f"{request.method} is not allowed on {request.url.path}.",
                             code="method_not_allowed")
    else:
        err = oe.OpenAIError(exc.status_code, str(exc.detail))
    return error_response(err)


async def server_error(request: Request, exc: Exception) -> Response:
    return error_response(oe.OpenAIError(500, "The gateway failed on this request; retry.",
                                         type_="server_error", code="internal_error"))


def build_standalone_app(state: GatewayState, max_body_bytes: int) -> Starlette:
    """The gateway without the platform's common endpoints (tests of the pure HTTP shape)."""
    api = GatewayApi(state, max_body_bytes)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        await state.start()
        try:
            yield
        finally:
            await state.stop()

    app = Starlette(routes=routes(api), lifespan=lifespan,
                    exception_handlers={HTTPException: http_error, Exception: server_error})
    app.add_middleware(TestModeHeader)
    return app



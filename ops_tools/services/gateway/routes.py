"""The gateway's routes and handlers on the platform's app (``create_app(error_shape="own")``)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ops_tools.services.gateway import openai_errors as oe
from ops_tools.services.gateway.api import TEST_MODE_HEADER, GatewayApi, error_response
from ops_tools.services.gateway.service import GatewayState

TEST_MODE = (TEST_MODE_HEADER.lower().encode(), b"true")


class GatewayEdge:
    """Outermost: every response says the gateway runs in test mode, and a request id the client
    sends is dropped, so the platform's middleware generates a fresh one: it becomes the
    receipt's id, which must be unique. Raw ASGI: nothing allocated per request but a closure."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope["headers"] = [h for h in scope.get("headers", []) if h[0] != b"x-request-id"]

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), TEST_MODE]
            await send(message)

        await self.app(scope, receive, send_with_header)


def install(app: FastAPI, state: GatewayState, max_body_bytes: int) -> GatewayApi:
    api = GatewayApi(state, max_body_bytes)
    for path in ("/v1/chat/completions", "/v1/completions", "/v1/embeddings"):
        app.add_route(path, api.inference, methods=["POST"], include_in_schema=False)
    app.add_route("/v1/models", api.models, methods=["GET"], include_in_schema=False)
    app.add_route("/v1/usage", api.usage, methods=["GET"], include_in_schema=False)
    app.add_route("/v1/workers/announce", api.announce, methods=["POST"],
                  include_in_schema=False)
    app.add_route("/v1/workers/heartbeat", api.heartbeat, methods=["POST"],
                  include_in_schema=False)
    app.add_route("/v1/workers", api.workers, methods=["GET"], include_in_schema=False)
    app.add_route("/v1/workers/mine", api.own_workers, methods=["POST"],
                  include_in_schema=False)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(Exception, server_error)
    app.add_middleware(GatewayEdge)
    return api


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


async def invalid_request(request: Request, exc: Exception) -> Response:
    return error_response(oe.OpenAIError(400, str(exc)[:500], code="invalid_value"))


async def server_error(request: Request, exc: Exception) -> Response:
    rid = request.scope.get("net_request_id", "")
    return error_response(oe.OpenAIError(
        500, f"The gateway failed on this request; report request id {rid}.",
        type_="server_error", code="internal_error"))

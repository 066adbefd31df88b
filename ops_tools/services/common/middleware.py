"""The one ASGI middleware every service runs: request id, body limits, content type, strict
JSON (:mod:`jsonbody`: a hostile body is a 400 naming the problem before any handler reads
it), access log and request metrics. Plain ASGI rather than Starlette's BaseHTTPMiddleware: it
adds no task per request and leaves streamed responses alone (the gateway's hot path goes
through it)."""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson

from ops_tools.services.common import jsonbody, logs
from ops_tools.services.common.metrics import HttpMetrics

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

REQUEST_ID_RE = re.compile(rb"^[A-Za-z0-9._-]{1,64}$")
BODY_METHODS = {"POST", "PUT", "PATCH"}
access = logging.getLogger("ops_tools.services.access")

ErrorBody = Callable[[int, str, str], bytes]


def _is_json(headers: dict[bytes, bytes]) -> bool:
    ctype = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
    return ctype == b"application/json" or ctype.endswith(b"+json")


def net_error_body(status: int, code: str, message: str) -> bytes:
    return orjson.dumps({"error": {"code": code, "message": message}})


class ServiceMiddleware:
    def __init__(self, app: ASGIApp, *, metrics: HttpMetrics, max_body_bytes: int,
                 json_only: bool = True, error_body: ErrorBody = net_error_body) -> None:
        self.app = app
        self.metrics = metrics
        self.max_body = max_body_bytes
        self.json_only = json_only
        self.error_body = error_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        headers = dict(scope.get("headers") or [])
        rid_raw = headers.get(b"x-request-id", b"")
        rid = rid_raw.decode() if REQUEST_ID_RE.match(rid_raw) else uuid.uuid4().hex
        scope["net_request_id"] = rid
        token = logs.request_id.set(rid)
        status = 500
        rid_header = (b"x-request-id", rid.encode())

        async def send_wrapped(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []), rid_header]
            await send(message)

        try:
            refusal = self._refusal(scope, headers)
            if refusal is not None:
                await self._reply(send_wrapped, *refusal)
            else:
                json_body = _is_json(headers)
                if scope["method"] in BODY_METHODS and (
                        json_body or b"content-length" not in headers):
                    receive = await self._bounded(receive, send_wrapped, check_json=json_body)
                if receive is not None:
                    await self.app(scope, receive, send_wrapped)
        finally:
            elapsed = time.perf_counter() - started
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            self.metrics.observe(route, scope["method"], status, elapsed)
            access.info("request", extra={
                "method": scope["method"], "path": scope["path"], "status": status,
                "duration_ms": round(elapsed * 1000, 2),
            })
            logs.request_id.reset(token)

    def _refusal(self, scope: Scope, headers: dict[bytes, bytes]) -> tuple[int, str, str] | None:
        if scope["method"] not in BODY_METHODS:
            return None
        length = headers.get(b"content-length")
        if length is not None:
            try:
                size = int(length)
            except ValueError:
                return 400, "invalid_header", "Content-Length is not a number"
            if size > self.max_body:
                return (413, "body_too_large",
                        f"the body has {size} bytes; at most {self.max_body} are accepted")
            if size == 0:
                return None
        if self.json_only and not _is_json(headers):
            ctype = headers.get(b"content-type", b"")
            shown = ctype.split(b";")[0].strip().lower().decode(errors="replace") or "none"
            return (415, "unsupported_media_type",
                    f"Content-Type {shown} is not accepted; send application/json")
        return None

    async def _bounded(self, receive: Receive, send: Send, *,
                       check_json: bool) -> Receive | None:
        """Read the body up to the limit (and, for JSON, check it strictly), then replay it to
        the app."""
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return receive
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                await self._reply(send, 413, "body_too_large",
                                  f"the body exceeds {self.max_body} bytes; send less")
                return None
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if check_json and body:
            try:
                jsonbody.loads(body)
            except jsonbody.JsonBodyError as exc:
                await self._reply(send, 400, "invalid_json",
                                  f"the body is not acceptable JSON: {exc.problem} at"
                                  f" {exc.path}: {exc.message}")
                return None
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return replay

    async def _reply(self, send: Send, status: int, code: str, message: str) -> None:
        body = self.error_body(status, code, message)
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        ]})
        await send({"type": "http.response.body", "body": body})

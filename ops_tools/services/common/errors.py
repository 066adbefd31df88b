"""One error shape for every service (the gateway speaks OpenAI's instead):
``{"error": {"code": "<machine word>", "message": "<what and what to do>", ...details}}``
with the matching status, and ``Retry-After`` on 429 and 503. Never an error inside a 200.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger("ops_tools.services")


class ApiError(Exception):
    """Raise it from a handler: it becomes the error response, as it says."""

    def __init__(self, status: int, code: str, message: str, *,
                 retry_after: int | None = None, **details: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after
        self.details = details

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, **self.details}}

    def response(self) -> JSONResponse:
        headers = {"Retry-After": str(max(1, self.retry_after))} \
            if self.retry_after is not None else None
        return JSONResponse(self.body(), status_code=self.status, headers=headers)


def bad_field(field: str, message: str, **details: Any) -> ApiError:
    return ApiError(400, "invalid_field", f"{field}: {message}", field=field, **details)


def field_of(loc: tuple[Any, ...] | list[Any]) -> str:
    """``('body', 'recipient')`` -> ``recipient``; ``('query', 'limit')`` -> ``limit``."""
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header", "cookie")]
    return ".".join(parts) or "body"


def validation_error(exc: RequestValidationError) -> ApiError:
    """The first problem of a request that did not validate, as a 400 naming the field."""
    err = exc.errors()[0]
    kind = err.get("type", "")
    field = field_of(err.get("loc", ()))
    if kind == "json_invalid":
        return ApiError(400, "invalid_json", "the body is not valid JSON; send a JSON object")
    if kind in ("model_attributes_type", "dict_type") and field == "body":
        return ApiError(400, "invalid_body", "the body must be a JSON object")
    if kind == "missing":
        return bad_field(field, "missing; it is required")
    if kind == "extra_forbidden":
        return ApiError(400, "unknown_field", f"{field}: unknown field; remove it", field=field)
    message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    return bad_field(field, message)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return validation_error(exc).response()

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {404: "not_found", 405: "method_not_allowed"}
        message = {
            404: f"{request.url.path}: no such resource; see /docs for the API",
            405: f"{request.method} is not allowed on {request.url.path}",
        }.get(exc.status_code, str(exc.detail))
        error = ApiError(exc.status_code, codes.get(exc.status_code, "http_error"), message)
        response = error.response()
        if exc.headers:
            response.headers.update(exc.headers)
        return response

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        request_id = request.scope.get("net_request_id", "")
        log.error("unhandled error", exc_info=exc, extra={"path": request.url.path})
        return ApiError(500, "internal_error",
                        f"the service failed on this request; report request id {request_id}",
                        request_id=request_id).response()

"""OpenAI's error shape: ``{"error": {"message", "type", "param", "code"}}`` with its statuses.

The ``openai`` SDK maps the status to its exception class (401 AuthenticationError, 404
NotFoundError, 429 RateLimitError, ...) and reads ``Retry-After``; these bodies and headers are
what it sees.
"""

from __future__ import annotations

from typing import Any

import orjson


class OpenAIError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        type_: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.param = param
        self.code = code
        self.retry_after = retry_after

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code}}

    def json_bytes(self) -> bytes:
        return orjson.dumps(self.body())

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}


def invalid_api_key() -> OpenAIError:
    return OpenAIError(
        401,
        "Incorrect API key provided. Create one with `ops-tools gateway keys create`.",
        code="invalid_api_key",
    )


def missing_api_key() -> OpenAIError:
    return OpenAIError(
        401,
        "You didn't provide an API key. Send it as `Authorization: Bearer KEY`.",
        code="invalid_api_key",
    )


def model_not_found(model: str) -> OpenAIError:
    return OpenAIError(
        404,
        f"The model `{model}` does not exist or you do not have access to it.",
        param="model",
        code="model_not_found",
    )


def invalid_param(param: str, message: str) -> OpenAIError:
    return OpenAIError(400, message, param=param, code="invalid_value")


def too_large(limit: int) -> OpenAIError:
    return OpenAIError(
        413, f"The request body is over {limit} bytes; send a smaller request.",
        code="request_too_large",
    )


def no_worker(model: str, retry_after: int) -> OpenAIError:
    return OpenAIError(
        503,
        f"No live worker serves the model `{model}` right now; retry later.",
        type_="server_error",
        param="model",
        code="no_live_worker",
        retry_after=retry_after,
    )


def budget_exhausted(retry_after: int) -> OpenAIError:
    return OpenAIError(
        429,
        "This API key's budget cannot cover the maximum cost of this request; lower max_tokens"
        " or raise the budget.",
        type_="insufficient_quota",
        code="insufficient_quota",
        retry_after=retry_after,
    )


def rate_limited(what: str, limit: int, retry_after: int) -> OpenAIError:
    return OpenAIError(
        429,
        f"Rate limit reached: {limit} {what} per minute for this API key; retry in"
        f" {retry_after} s.",
        type_=what,
        code="rate_limit_exceeded",
        retry_after=retry_after,
    )


def upstream_failed(detail: str) -> OpenAIError:
    return OpenAIError(
        502, f"The worker failed: {detail}", type_="server_error", code="upstream_error",
    )


def platform_error_body(status: int, code: str, message: str) -> bytes:
    """The platform middleware's own refusals (413, 415, 400 on a bad header), OpenAI-shaped."""
    code = {"body_too_large": "request_too_large"}.get(code, code)
    return OpenAIError(status, message, code=code).json_bytes()

"""Validating OpenAI request bodies just enough to route, price and bound them.

The body goes to the worker as the client sent it, except ``max_tokens`` (a cap is added when the
client gave none, so the reserved maximum cost is a true bound) and ``stream_options`` (usage is
always asked of the worker, because the receipt needs it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from ops_tools.services.gateway.openai_errors import OpenAIError, invalid_param

ENDPOINTS = {
    "/v1/chat/completions": "chat",
    "/v1/completions": "text",
    "/v1/embeddings": "embeddings",
}


@dataclass
class ParsedRequest:
    kind: str  # chat | text | embeddings
    model: str
    body: dict[str, Any]
    stream: bool
    client_wants_usage: bool
    max_input_tokens: int
    max_output_tokens: int


def _positive_int(body: dict[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise invalid_param(name, f"`{name}` must be a positive integer, got {value!r}.")
    return value


def _text_bytes(value: Any) -> int:
    """An upper bound of the tokens in ``value``: a token is at least one UTF-8 byte."""
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, list):
        return sum(_text_bytes(v) for v in value)
    if isinstance(value, dict):
        return sum(_text_bytes(v) for v in value.values())
    if isinstance(value, int):  # pre-tokenized input: one token per id
        return 1
    return 0


def parse(kind: str, raw: bytes, *, default_max_tokens: int, max_tokens_cap: int) -> ParsedRequest:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise OpenAIError(
            400, "We could not parse the JSON body of your request; send a JSON object.",
            code="invalid_json",
        ) from exc
    if not isinstance(body, dict):
        raise OpenAIError(400, "The request body must be a JSON object.", code="invalid_json")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise invalid_param("model", "you must provide a model parameter (a string).")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise invalid_param("stream", f"`stream` must be a boolean, got {stream!r}.")
    if kind == "embeddings":
        if stream:
            raise invalid_param("stream", "embeddings cannot be streamed.")
        value = body.get("input")
        if not (isinstance(value, str) and value) and not (isinstance(value, list) and value):
            raise invalid_param("input", "`input` must be a non-empty string or array.")
        return ParsedRequest(kind, model, body, False, False, _text_bytes(value), 0)
    if kind == "chat":
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise invalid_param("messages", "`messages` must be a non-empty array.")
        for i, message in enumerate(messages):
            if not isinstance(message, dict) or not isinstance(message.get("role"), str):
                raise invalid_param(
                    f"messages[{i}]", f"`messages[{i}]` must be an object with a `role`."
                )
        input_bound = _text_bytes(messages) + 4 * len(messages)
    else:
        prompt = body.get("prompt")
        if not isinstance(prompt, str | list):
            raise invalid_param("prompt", "`prompt` must be a string or an array.")
        input_bound = _text_bytes(prompt)
    n = _positive_int(body, "n")
    if n not in (None, 1):
        raise invalid_param("n", "only n=1 is served by this gateway.")
    asked = _positive_int(body, "max_completion_tokens") or _positive_int(body, "max_tokens")
    if asked is not None and asked > max_tokens_cap:
        field = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
        raise invalid_param(field, f"`{field}` is {asked}; the most this gateway allows is"
                            f" {max_tokens_cap}.")
    max_out = asked or default_max_tokens
    if asked is None:
        body["max_tokens"] = max_out
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise invalid_param("stream_options", "`stream_options` must be an object.")
    wants_usage = bool(stream and options and options.get("include_usage"))
    if stream:
        body["stream_options"] = {**(options or {}), "include_usage": True}
    return ParsedRequest(kind, model, body, stream, wants_usage, input_bound, max_out)

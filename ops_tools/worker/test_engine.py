"""The TEST ENGINE: a stand-in for an inference engine (vLLM, llama.cpp, ...) for machines
without GPUs or model weights.

It speaks the OpenAI API shapes but generates deterministic text: the same request gives the same
words. Token counts are honest for its own tokenizer (a token is a run of non-space characters),
so the gateway's pricing and budgets are exercised with real numbers. Named a test engine
everywhere: nothing it produces is a model's output.
"""

from __future__ import annotations

import hashlib
import math
import struct
import time
from collections.abc import Iterator
from typing import Any

TEST_ENGINE_NAME = "net-test-engine"
DEFAULT_MODELS = ("net-test-chat", "net-test-embed")
DEFAULT_MAX_TOKENS = 16
EMBEDDING_DIMENSIONS = 16
_WORDS = (
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliett",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
    "uniform", "victor", "whiskey", "xray", "yankee", "zulu",
)


def count_tokens(text: str) -> int:
    return len(text.split())


def prompt_text(body: dict[str, Any]) -> str:
    """The text a request feeds the model: chat messages' contents or the completion prompt."""
    if "messages" in body:
        parts: list[str] = []
        for message in body["messages"]:
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):  # content parts: only the text ones count
                parts.extend(
                    p.get("text", "") for p in content if isinstance(p, dict)
                    and p.get("type") == "text"
                )
        return "\n".join(parts)
    prompt = body.get("prompt", "")
    if isinstance(prompt, list):
        return "\n".join(p for p in prompt if isinstance(p, str))
    return prompt if isinstance(prompt, str) else ""


def output_words(prompt: str, model: str, max_tokens: int) -> list[str]:
    seed = hashlib.sha256(f"{model}\0{prompt}".encode()).digest()
    words: list[str] = []
    counter = 0
    while len(words) < max_tokens:
        block = hashlib.sha256(seed + counter.to_bytes(4, "little")).digest()
        words.extend(_WORDS[b % len(_WORDS)] for b in block)
        counter += 1
    return words[:max_tokens]


def _max_tokens(body: dict[str, Any]) -> int:
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return DEFAULT_MAX_TOKENS


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _request_id(prefix: str, body: dict[str, Any]) -> str:
    digest = hashlib.sha256(repr(sorted(body.items())).encode()).hexdigest()[:24]
    return f"{prefix}-{digest}"


def complete(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    """A whole (non-streaming) answer; ``kind`` is ``chat`` or ``text``."""
    model = str(body.get("model", ""))
    prompt = prompt_text(body)
    words = output_words(prompt, model, _max_tokens(body))
    text = " ".join(words)
    created = int(time.time())
    usage = _usage(count_tokens(prompt), len(words))
    if kind == "chat":
        return {
            "id": _request_id("chatcmpl", body),
            "object": "chat.completion",
            "created": created,
            "model": model,
            "system_fingerprint": TEST_ENGINE_NAME,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": "length",
            }],
            "usage": usage,
        }
    return {
        "id": _request_id("cmpl", body),
        "object": "text_completion",
        "created": created,
        "model": model,
        "system_fingerprint": TEST_ENGINE_NAME,
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": "length"}],
        "usage": usage,
    }


def stream(kind: str, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The chunks of a streamed answer (without the SSE framing and without ``[DONE]``)."""
    model = str(body.get("model", ""))
    prompt = prompt_text(body)
    words = output_words(prompt, model, _max_tokens(body))
    created = int(time.time())
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    chat = kind == "chat"
    rid = _request_id("chatcmpl" if chat else "cmpl", body)
    obj = "chat.completion.chunk" if chat else "text_completion"

    def chunk(choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": rid, "object": obj, "created": created, "model": model,
            "system_fingerprint": TEST_ENGINE_NAME, "choices": choices,
        }
        if include_usage:
            out["usage"] = usage
        return out

    if chat:
        yield chunk([{"index": 0, "delta": {"role": "assistant", "content": ""},
                      "logprobs": None, "finish_reason": None}])
    for i, word in enumerate(words):
        piece = word if i == 0 else " " + word
        last = i == len(words) - 1
        if chat:
            choice = {"index": 0, "delta": {"content": piece}, "logprobs": None,
                      "finish_reason": "length" if last else None}
        else:
            choice = {"index": 0, "text": piece, "logprobs": None,
                      "finish_reason": "length" if last else None}
        yield chunk([choice])
    if include_usage:
        yield chunk([], _usage(count_tokens(prompt), len(words)))


def embed(body: dict[str, Any]) -> dict[str, Any]:
    model = str(body.get("model", ""))
    inputs = body.get("input", "")
    items = inputs if isinstance(inputs, list) else [inputs]
    data = []
    total = 0
    for index, item in enumerate(items):
        text = item if isinstance(item, str) else " ".join(str(t) for t in item)
        total += count_tokens(text)
        digest = hashlib.sha256(f"{model}\0{text}".encode()).digest()
        raw = struct.unpack("<16h", digest)
        norm = math.sqrt(sum(v * v for v in raw)) or 1.0
        data.append({"object": "embedding", "index": index,
                     "embedding": [v / norm for v in raw[:EMBEDDING_DIMENSIONS]]})
    return {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": total, "total_tokens": total},
    }

"""llama.cpp: the C++ ``llama-server`` or ``llama-cpp-python``'s server (``python -m
llama_cpp.server``, what the local network runs).

``llama-server`` answers ``/health`` 503 while it loads the model and 200 after; it publishes load
at ``/metrics`` with ``--metrics`` (``llamacpp:requests_processing``,
``llamacpp:requests_deferred``) and per slot at ``/slots``. ``llama-cpp-python``'s server has
none of those (404): it is ready when it lists its model, and its load is what this worker has in
flight to it (it answers one request at a time and queues the others behind a lock). Errors:
``{"error": {"code", "message", "type"}}`` from ``llama-server``, FastAPI's ``{"detail"}`` from
the Python server.

Usage on streams: ``llama-server`` sends it with ``stream_options.include_usage``;
``llama-cpp-python`` ignores the option and never does. When a stream asked for usage and ended
without it, this adapter appends the usage chunk itself before ``[DONE]``, counted by the
engine's own tokenizer (``/extras/tokenize/count``): the prompt as the engine rendered it (chat:
the Gemma turn format the local network's server runs with, ``--chat_format gemma``) and the
streamed text.

Chat prompt format (the packaged Gemma 3 270M is a base model without a chat template)::

    <start_of_turn>user\n{content}<end_of_turn>\n<start_of_turn>model\n{content}<end_of_turn>\n
    ... <start_of_turn>model\n

``system`` messages are dropped (Gemma has no system turn), as ``llama-cpp-python`` does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson

from ops_tools.sse import EventSplitter
from ops_tools.worker.engines.base import Answer, EngineLoad, HttpEngine

_TURN = {"user": "<start_of_turn>user\n", "assistant": "<start_of_turn>model\n"}
_END = "<end_of_turn>\n"
MAX_EVENT = 1 << 20


def gemma_prompt(messages: Any) -> str:
    """Chat messages in Gemma's turn format, ending with the model's open turn."""
    out = ""
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict) or message.get("role") not in _TURN:
            continue
        content = message.get("content")
        if isinstance(content, str) and content:
            out += _TURN[message["role"]] + content + _END
    return out + _TURN["assistant"]


def _piece(event: dict[str, Any]) -> str:
    """The text one stream chunk adds (completion ``text`` or chat ``delta.content``)."""
    choices = event.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ""
    choice = choices[0]
    delta = choice.get("delta")
    text = delta.get("content") if isinstance(delta, dict) else choice.get("text")
    return text if isinstance(text, str) else ""


class LlamaCppEngine(HttpEngine):
    kind = "llamacpp"
    name = "llama.cpp"

    def __init__(self, base_url: str) -> None:
        super().__init__(base_url)
        self.inflight = 0

    async def ready(self) -> str | None:
        try:
            status, _ = await self._get("/health")
        except Exception as exc:
            return f"the llamacpp engine does not answer /health: {type(exc).__name__}"
        if status == 404:  # llama-cpp-python's server: no /health
            return await super().ready()
        return None if status == 200 else f"the llamacpp engine's /health answers {status}"

    async def load(self) -> EngineLoad | None:
        measured = await self._prometheus_load("llamacpp:requests_processing",
                                               "llamacpp:requests_deferred")
        if measured is not None:
            return measured
        status, raw = await self._get("/slots")
        if status == 200:
            slots = orjson.loads(raw)
            if isinstance(slots, list):
                busy = sum(1 for s in slots if isinstance(s, dict) and s.get("is_processing"))
                return EngineLoad(busy, 0)
        # One request runs at a time; the rest wait for it.
        return EngineLoad(min(self.inflight, 1), max(self.inflight - 1, 0))

    async def answer(self, path: str, raw: bytes) -> Answer:
        self.inflight += 1
        try:
            answer = await super().answer(path, raw)
        except BaseException:
            self.inflight -= 1
            raise
        if answer.stream is None:
            self.inflight -= 1
            return answer
        body = orjson.loads(raw)
        wants_usage = isinstance(body, dict) and bool(
            (body.get("stream_options") or {}).get("include_usage"))
        answer.stream = self._counted(answer.stream, body if wants_usage else None, path)
        return answer

    async def _count_tokens(self, model: str, text: str) -> int:
        """Tokens of ``text`` by the engine's tokenizer (its count includes the BOS token)."""
        async with self.client.post(self.base_url + "/extras/tokenize/count",
                                    json={"model": model, "input": text}) as response:
            doc = orjson.loads(await response.content.read(MAX_EVENT))
        return int(doc["count"])

    async def _usage_chunk(self, body: dict[str, Any], last: dict[str, Any], path: str,
                           text: str) -> bytes:
        model = str(body.get("model", ""))
        if path == "/v1/chat/completions":
            prompt = gemma_prompt(body.get("messages"))
        else:
            prompt = body.get("prompt") if isinstance(body.get("prompt"), str) else ""
        prompt_tokens = await self._count_tokens(model, prompt)
        completion_tokens = max(await self._count_tokens(model, text) - 1, 0) if text else 0
        chunk = {"id": last.get("id"), "object": last.get("object"),
                 "created": last.get("created"), "model": last.get("model"), "choices": [],
                 "usage": {"prompt_tokens": prompt_tokens,
                           "completion_tokens": completion_tokens,
                           "total_tokens": prompt_tokens + completion_tokens}}
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    async def _counted(self, stream: AsyncIterator[bytes], body: dict[str, Any] | None,
                       path: str) -> AsyncIterator[bytes]:
        """The stream as the engine sends it; when ``body`` asked for usage, event by event,
        with the usage chunk added before ``[DONE]`` if the engine sent none."""
        splitter = EventSplitter(MAX_EVENT)
        text, last, had_usage = "", {}, False
        try:
            async for piece in stream:
                if body is None:
                    yield piece
                    continue
                for line in splitter.feed(piece):
                    data = line[5:].strip()
                    if data == b"[DONE]":
                        if not had_usage:
                            yield await self._usage_chunk(body, last, path, text)
                        yield b"data: [DONE]\n\n"
                        continue
                    event = orjson.loads(data)
                    if isinstance(event, dict):
                        last = event
                        text += _piece(event)
                        had_usage = had_usage or event.get("usage") is not None
                    yield line + b"\n\n"
        finally:
            self.inflight -= 1

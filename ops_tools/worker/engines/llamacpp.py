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
engine's own tokenizer: the prompt as the engine rendered it (chat: the Gemma turn format the
local network's server runs with, ``--chat_format gemma``) and the streamed text. With the
engine's model file at hand (``engine_model_path``) the worker loads that tokenizer itself
(llama.cpp, vocabulary only) and counts in process; otherwise it asks the engine
(``/extras/tokenize/count``), which waits for the engine's one lock: behind every request queued
there, so the stream's end waits for them too. The stream's events pass through as they come;
only the usage chunk needs their text, and it is parsed once, at ``[DONE]``.

Chat prompt format (the packaged Gemma 3 270M is a base model without a chat template)::

    <start_of_turn>user\n{content}<end_of_turn>\n<start_of_turn>model\n{content}<end_of_turn>\n
    ... <start_of_turn>model\n

``system`` messages are dropped (Gemma has no system turn), as ``llama-cpp-python`` does."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson

from ops_tools.sse import EventSplitter
from ops_tools.worker.engines.base import (
    ENGINE_KEEPALIVE_S,
    Answer,
    EngineLoad,
    HttpEngine,
    read_whole,
)

_TURN = {"user": "<start_of_turn>user\n", "assistant": "<start_of_turn>model\n"}
_END = "<end_of_turn>\n"
MAX_EVENT = 1 << 20
# Texts up to this many characters are tokenized on the event loop itself (well under 1 ms).
INLINE_TOKENIZE = 16 << 10
LOAD_PAGES_RETRY_S = 60.0


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

    def __init__(self, base_url: str, model_path: Path | None = None,
                 keepalive_s: float = ENGINE_KEEPALIVE_S) -> None:
        super().__init__(base_url, keepalive_s)
        self.inflight = 0
        self.model_path = model_path
        self._tokenizer: Any = None
        self._loading: asyncio.Task[Any] | None = None
        self._no_load_pages_until = 0.0

    async def tokenizer(self) -> Any:
        """llama.cpp's tokenizer of ``model_path`` (vocabulary only, no weights), loaded once in
        a thread; None without a model path."""
        if self.model_path is None:
            return None
        if self._tokenizer is None:
            if self._loading is None:
                self._loading = asyncio.ensure_future(asyncio.to_thread(
                    load_tokenizer, self.model_path))
            self._tokenizer = await asyncio.shield(self._loading)
        return self._tokenizer

    async def models(self) -> list[str]:
        # The worker's start lists the models: the tokenizer is loaded then, not on a stream.
        names = await super().models()
        with contextlib.suppress(Exception):  # (``ready`` says why it failed)
            await self.tokenizer()
        return names

    async def ready(self) -> str | None:
        try:
            status, _ = await self._get("/health")
        except Exception as exc:
            return f"the llamacpp engine does not answer /health: {type(exc).__name__}"
        if status == 404:  # llama-cpp-python's server: no /health
            problem = await super().ready()
        else:
            problem = None if status == 200 else f"the llamacpp engine's /health answers {status}"
        if problem is None:
            try:
                await self.tokenizer()
            except Exception as exc:
                return f"cannot load the tokenizer of {self.model_path}: {exc}"
        return problem

    async def load(self) -> EngineLoad | None:
        # llama-cpp-python's server has neither page: asked again only now and then, not at
        # every health check (each is a request the engine's process serves beside a stream).
        if time.monotonic() >= self._no_load_pages_until:
            measured = await self._prometheus_load("llamacpp:requests_processing",
                                                   "llamacpp:requests_deferred")
            if measured is not None:
                return measured
            status, raw = await self._get("/slots")
            if status == 200:
                slots = orjson.loads(raw)
                if isinstance(slots, list):
                    busy = sum(1 for s in slots
                               if isinstance(s, dict) and s.get("is_processing"))
                    return EngineLoad(busy, 0)
            self._no_load_pages_until = time.monotonic() + LOAD_PAGES_RETRY_S
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

    async def _engine_count(self, model: str, text: str) -> int:
        async with self.client.post(self.base_url + "/extras/tokenize/count",
                                    json={"model": model, "input": text}) as response:
            doc = orjson.loads(await read_whole(response, MAX_EVENT))
        return int(doc["count"])

    async def _count_tokens(self, model: str, texts: tuple[str, str]) -> tuple[int, int]:
        """Tokens of each text by the engine's tokenizer (its count includes the BOS token)."""
        try:
            tokenizer = await self.tokenizer()
        except Exception:  # unready (``ready`` says why); the engine can still count
            tokenizer = None
        if tokenizer is None:
            first, second = await asyncio.gather(*(self._engine_count(model, t) for t in texts))
            return first, second
        if sum(len(t) for t in texts) > INLINE_TOKENIZE:  # a long prompt: off the event loop
            return await asyncio.to_thread(_count_all, tokenizer, texts)
        return _count_all(tokenizer, texts)

    async def _usage_chunk(self, body: dict[str, Any], events: list[bytes], path: str) -> bytes:
        text, last = "", {}
        for data in events:
            try:
                event = orjson.loads(data)
            except orjson.JSONDecodeError:
                continue
            if isinstance(event, dict):
                last = event
                text += _piece(event)
        model = str(body.get("model", ""))
        if path == "/v1/chat/completions":
            prompt = gemma_prompt(body.get("messages"))
        else:
            prompt = body.get("prompt") if isinstance(body.get("prompt"), str) else ""
        prompt_tokens, text_tokens = await self._count_tokens(model, (prompt, text))
        completion_tokens = max(text_tokens - 1, 0) if text else 0
        chunk = {"id": last.get("id"), "object": last.get("object"),
                 "created": last.get("created"), "model": last.get("model"), "choices": [],
                 "usage": {"prompt_tokens": prompt_tokens,
                           "completion_tokens": completion_tokens,
                           "total_tokens": prompt_tokens + completion_tokens}}
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    async def _counted(self, stream: AsyncIterator[bytes], body: dict[str, Any] | None,
                       path: str) -> AsyncIterator[bytes]:
        """The stream as the engine sends it; when ``body`` asked for usage, the complete
        events of each piece, with the usage chunk added before ``[DONE]`` if the engine sent
        none. The events are kept as bytes and decoded only then, not one by one."""
        splitter = EventSplitter(MAX_EVENT)
        events: list[bytes] = []
        had_usage = False
        try:
            async for piece in stream:
                if body is None:
                    yield piece
                    continue
                out = []
                for line in splitter.feed(piece):
                    data = line[5:].strip()
                    if data == b"[DONE]":
                        if not had_usage:
                            out.append(await self._usage_chunk(body, events, path))
                        out.append(b"data: [DONE]\n\n")
                        continue
                    events.append(data)
                    if not had_usage and b'"usage"' in data:
                        event = orjson.loads(data)
                        had_usage = isinstance(event, dict) and event.get("usage") is not None
                    out.append(line + b"\n\n")
                if out:
                    yield b"".join(out)
        finally:
            self.inflight -= 1


def load_tokenizer(model_path: Path) -> Any:
    """llama.cpp's vocabulary of a GGUF file, without its weights (the ``llamacpp`` extra)."""
    try:
        from llama_cpp import Llama
    except ImportError:
        raise RuntimeError("engine_model_path: counting with the model's tokenizer needs"
                           " llama-cpp-python: pip install 'net-ops[llamacpp]', or leave"
                           " engine_model_path out (the engine counts)") from None
    return Llama(model_path=str(model_path), vocab_only=True, verbose=False)


def _count_all(tokenizer: Any, texts: tuple[str, str]) -> tuple[int, int]:
    # As llama-cpp-python's /extras/tokenize/count: with BOS, special tokens parsed.
    first, second = (len(tokenizer.tokenize(t.encode("utf-8"), special=True)) for t in texts)
    return first, second

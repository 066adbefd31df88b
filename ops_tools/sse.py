"""Server-sent events of the OpenAI streaming API: splitting, usage extraction, error events."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

DONE = b"data: [DONE]"


@dataclass
class StreamTally:
    """What a relayed stream showed: its usage (from the usage-only chunk) and its end."""

    prompt_tokens: Any = None  # as the worker reported them, unchecked
    completion_tokens: Any = None
    done: bool = False
    relayed: int = 0  # answer chunks the client was sent (the usage-only chunk not counted)


def classify(event: bytes, tally: StreamTally) -> bool:
    """Inspect one event (``data: ...`` line); True when it is the usage-only chunk.

    Only events that carry a non-null usage object are parsed, so the common delta chunk costs a
    substring search, not a JSON decode.
    """
    if event == DONE:
        tally.done = True
        return False
    if b'"usage":{' not in event and b'"usage": {' not in event:
        return False
    try:
        doc = orjson.loads(event[5:])
    except orjson.JSONDecodeError:
        return False
    usage = doc.get("usage") if isinstance(doc, dict) else None
    if isinstance(usage, dict):
        # As the worker sent them: whether they are billed is usage.bill's decision.
        tally.prompt_tokens = usage.get("prompt_tokens")
        tally.completion_tokens = usage.get("completion_tokens")
    return isinstance(doc, dict) and doc.get("choices") == []


def error_event(message: str, code: str = "upstream_error") -> bytes:
    body = {"error": {"message": message, "type": "server_error", "param": None, "code": code}}
    return b"data: " + orjson.dumps(body) + b"\n\n"


class LineTooLong(Exception):
    """A worker's event line passed the configured limit (the gateway buffers no more)."""


class EventSplitter:
    """Feeds raw bytes, yields complete ``data:`` lines (SSE events are one data line here).
    A line longer than ``max_line`` bytes raises ``LineTooLong``."""

    def __init__(self, max_line: int) -> None:
        self._buffer = b""
        self.max_line = max_line

    def feed(self, chunk: bytes) -> list[bytes]:
        self._buffer += chunk
        if b"\n" not in chunk:
            self._check(self._buffer)
            return []
        *lines, self._buffer = self._buffer.split(b"\n")
        self._check(self._buffer)
        for line in lines:
            self._check(line)
        return [line.rstrip(b"\r") for line in lines if line.startswith(b"data:")]

    def _check(self, line: bytes) -> None:
        if len(line) > self.max_line:
            raise LineTooLong(f"an event line of the stream passed the limit of"
                              f" {self.max_line} bytes")

"""JSON log lines on stderr, each with the request id of the request that wrote it.

Secrets a service loads are registered with :func:`redact`; any log line that would carry one
prints ``<redacted>`` instead: a second line of defence behind never logging them at all.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import time
from typing import Any

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("net_request_id", default="")

_SECRETS: set[str] = set()
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def redact(secret: str) -> None:
    """Never print ``secret`` in a log line (for values of at least 8 characters)."""
    if len(secret) >= 8:
        _SECRETS.add(secret)


def _scrub(text: str) -> str:
    for secret in _SECRETS:
        if secret in text:
            text = text.replace(secret, "<redacted>")
    return text


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "service": self.service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        rid = request_id.get()
        if rid:
            entry["request_id"] = rid
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return _scrub(json.dumps(entry, default=str))


def configure(service: str, level: str = "info") -> None:
    """Route every logger (ours, uvicorn's, SQLAlchemy's) through one JSON handler."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        lg = logging.getLogger(name)
        lg.handlers[:] = []
        lg.propagate = True
    # The middleware writes one access line per request with its id; uvicorn's has none.
    logging.getLogger("uvicorn.access").disabled = True

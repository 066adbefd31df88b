"""The one advisory file lock (fcntl) of the suite: one build per cache key, one reset cycle per
inventory.

The kernel drops the lock when the holder dies, so a killed process never leaves a stale lock
behind. A holder may write who it is into the file, for the message of whoever finds it taken.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any


class LockBusy(Exception):
    """The lock is held and the caller would not wait; ``holder`` is what its holder wrote
    (parsed JSON, or ``{"text": ...}`` when it is not JSON)."""

    def __init__(self, path: Path, holder: dict[str, Any]) -> None:
        super().__init__(f"{path} is locked by {holder or 'an unknown holder'}")
        self.path = path
        self.holder = holder


def _holder(fd: int) -> dict[str, Any]:
    text = os.pread(fd, 4096, 0).decode(errors="replace").strip()
    if not text:
        return {}
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return {"text": text}
    return parsed if isinstance(parsed, dict) else {"text": text}


@contextlib.contextmanager
def file_lock(
    path: Path,
    *,
    wait: bool = True,
    on_wait: Callable[[], None] | None = None,
    holder: Mapping[str, Any] | None = None,
    mode: int = 0o644,
) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created with ``mode`` if missing) for the body.

    When someone else holds it: with ``wait``, call ``on_wait`` once (to tell the user) and
    block; without, raise :class:`LockBusy` naming what the holder wrote. Once held, ``holder``
    (JSON) replaces the file's content.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, mode)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                raise LockBusy(path, _holder(fd)) from None
            if on_wait is not None:
                on_wait()
            fcntl.flock(fd, fcntl.LOCK_EX)
        if holder is not None:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(dict(holder)).encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock

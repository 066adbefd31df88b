"""One reset cycle at a time per inventory: an exclusive lock that names its holder."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ops_tools.errors import OpsError


class LockHeld(OpsError):
    pass


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


@contextmanager
def cycle_lock(path: Path, cycle_id: str) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "{}"
            try:
                h = json.loads(holder)
                who = (
                    f"pid {h.get('pid')} on {h.get('host')}, cycle {h.get('cycle_id')},"
                    f" since {_utc(h.get('since', 0))}"
                )
            except json.JSONDecodeError:
                who = holder
            raise LockHeld(
                f"another reset cycle is running on this inventory ({who}); wait for it, or"
                " --resume it once it has stopped"
            ) from None
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "cycle_id": cycle_id,
            "since": time.time(),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the flock

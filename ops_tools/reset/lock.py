"""One reset cycle at a time per inventory: the suite's file lock, naming its holder."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from ops_tools.errors import OpsError
from ops_tools.filelock import LockBusy, file_lock


class LockHeld(OpsError):
    pass


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


@contextmanager
def cycle_lock(path: Path, cycle_id: str) -> Iterator[None]:
    me = {"pid": os.getpid(), "host": socket.gethostname(), "cycle_id": cycle_id,
          "since": time.time()}
    held = ExitStack()
    try:
        held.enter_context(file_lock(path, wait=False, holder=me, mode=0o600))
    except LockBusy as busy:
        h = busy.holder
        who = h.get("text") or (f"pid {h.get('pid')} on {h.get('host')}, cycle"
                                f" {h.get('cycle_id')}, since {_utc(h.get('since', 0))}")
        raise LockHeld(
            f"another reset cycle is running on this inventory ({who}); wait for it, or"
            " --resume it once it has stopped"
        ) from None
    with held:
        yield

"""Half of a large genesis computed in a forked child, which inherits the parent's arrays.

Forking rather than a process pool: the child reads the parent's (large) buffers without
pickling them, and only its result comes back through a pipe.
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ops_tools.errors import OpsError


@dataclass(frozen=True)
class Worker:
    pid: int
    read_fd: int


def can_fork() -> bool:
    # Forking a process that runs other threads can leave their locks held in the child.
    return hasattr(os, "fork") and threading.active_count() == 1 and (os.cpu_count() or 1) > 1


def run_forked(job: Callable[[], object]) -> Worker:
    """Start ``job`` in a forked child; ``collect`` waits for its result."""
    read_fd, write_fd = os.pipe()
    gc.freeze()  # the child's collector then leaves the parent's objects (and their pages) alone
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        os.close(read_fd)
        status = 0
        try:
            try:
                payload = pickle.dumps((True, job()), protocol=pickle.HIGHEST_PROTOCOL)
            except BaseException as exc:  # sent to the parent, which raises it
                try:
                    payload = pickle.dumps((False, exc))
                except Exception:
                    payload = pickle.dumps((False, RuntimeError(repr(exc))))
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(payload)
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(write_fd)
    gc.unfreeze()
    return Worker(pid, read_fd)


def collect(worker: Worker) -> Any:
    """The job's result, or its exception raised here; OpsError if the child died."""
    with os.fdopen(worker.read_fd, "rb") as pipe:
        payload = pipe.read()
    _, status = os.waitpid(worker.pid, 0)
    # A child that was killed (the OOM killer, say) may have written part of its result.
    if os.WIFSIGNALED(status) or os.waitstatus_to_exitcode(status) != 0 or not payload:
        raise OpsError(
            f"a forked genesis worker (pid {worker.pid}) {_death(status)} before returning its"
            " result",
            hint="run the command again; if it recurs, look for the OOM killer in 'dmesg'",
        )
    ok, result = pickle.loads(payload)  # noqa: S301 - written by our own forked child
    if not ok:
        raise result
    return result


def _death(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"was killed by {name}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"

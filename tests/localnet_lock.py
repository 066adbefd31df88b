"""The local network's lock (/tmp/net-localnet.lock), as tests that start it take it.

The network uses fixed ports, so one run at a time in a network namespace: every command that
starts it in the machine's runs under ``flock /tmp/net-localnet.lock``. A test that starts it
(tests/deploy, tests/reset, tests/operator) takes the same lock itself, unless a process it
descends from already holds it (``flock /tmp/net-localnet.lock pytest ...``): flock(1) holds it
on its own open file, and a second ``flock()`` from the child would wait for itself. In the test
lane's own namespace (tests/netns.py) the ports are nobody else's, and no lock is taken.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from tests import netns

LOCK = Path("/tmp/net-localnet.lock")


def _ancestors(pid: int) -> set[int]:
    seen: set[int] = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return seen


def held_by_ancestor(path: Path = LOCK) -> bool:
    try:
        inode = path.stat().st_ino
        locks = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return False
    ancestors = _ancestors(os.getpid())
    for line in locks:
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234567 0 EOF" (blocked waiters carry "->")
        if len(parts) < 6 or parts[1] != "FLOCK" or "->" in parts:
            continue
        if parts[5].rsplit(":", 1)[-1] == str(inode) and int(parts[4]) in ancestors:
            return True
    return False


def _nothing_shared() -> None:
    pass


# Set by tests.localnet: purges the shared default network that this process keeps between
# modules (it holds the fixed ports, and the lock is this process's own, so flock would not wait).
release_shared: Callable[[], None] = _nothing_shared


@contextlib.contextmanager
def localnet_lock(path: Path = LOCK) -> Iterator[None]:
    if netns.inside():
        # The lane's own network namespace (tests/netns.py): its ports are this process's
        # alone, and the shared network runs in the machine's.
        yield
        return
    release_shared()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        if not held_by_ancestor(path):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)

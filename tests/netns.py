"""A network namespace of this test process's own, for a second lane of local networks.

The local network binds fixed loopback ports (inventories/local), so two of them cannot run side
by side in one network namespace. A namespace has a loopback of its own: the modules that start
networks of their own (``tests/process_lane.py``'s ``localnet-own`` group) run in one that this
process makes, while the shared default network runs in the machine's, on another worker.

``lane()`` makes the namespace on first use (``unshare(CLONE_NEWNET)`` on the calling thread,
``lo`` up) and enters it for the duration of a ``with``; what a test starts inside (``ops-tools``,
supervisord and its programs, clients) inherits it, and a daemon stays in it after the test. The
calling thread must be the one that runs the tests (pytest's main thread): a namespace is a
thread's, and every process and thread started from it inherits the one it is in.

Root only (CAP_SYS_ADMIN); ``available()`` says whether this machine lets a thread make one, so
that every pytest process of a run (xdist's controller and workers) chooses the same lanes.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _unshare() -> None:
    if _libc.unshare(CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET)")


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "setns(CLONE_NEWNET)")


@functools.cache
def available() -> bool:
    """Whether a thread here may make a network namespace (tried in a thread of its own, whose
    namespace goes with it) and ``ip`` is there to bring its loopback up."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    made: list[bool] = []

    def attempt() -> None:
        try:
            _unshare()
            made.append(True)
        except OSError:
            made.append(False)

    probe = threading.Thread(target=attempt, name="netns-probe")
    probe.start()
    probe.join()
    return made == [True]


class _Lane:
    home: int | None = None  # the namespace the thread came from
    own: int | None = None  # the lane's namespace, made once per process
    inside = False


def _make() -> int:
    assert _Lane.home is not None
    _unshare()
    try:
        fd = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True, capture_output=True,
                       timeout=30)
    finally:
        _setns(_Lane.home)
    return fd


@contextlib.contextmanager
def lane() -> Iterator[None]:
    """The calling thread in this process's own network namespace until the ``with`` ends."""
    if _Lane.inside:
        yield
        return
    if _Lane.home is None:
        _Lane.home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    if _Lane.own is None:
        _Lane.own = _make()
    _setns(_Lane.own)
    _Lane.inside = True
    try:
        yield
    finally:
        _Lane.inside = False
        _setns(_Lane.home)


def inside() -> bool:
    """Whether the tests run in the lane's namespace now (its ports are nobody else's)."""
    return _Lane.inside

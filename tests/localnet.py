"""The local network in tests: ``ops-tools localnet up`` on inventories/local (fixed ports, one
at a time on a machine, under /tmp/net-localnet.lock).

- ``started(state, ...)``: a module's own network. Takes the lock, ``localnet up --json``, and
  ``localnet down --purge --yes`` at the end, whatever happened. For the modules that purge it,
  reset it to a new genesis or need it fresh (tests/deploy, tests/reset, onboarding from nothing,
  the llama.cpp engine), and the drills (tests/drills/test_localnet_drills.py says why).
- ``shared_localnet`` (session fixture, so one per xdist worker; every module that uses the local
  network runs on one worker): one network that the modules which leave it healthy reuse, each
  through ``shared_localnet.acquire()`` at its start. That re-runs ``localnet up`` (no change,
  fast; it starts what a previous module left stopped) and checks every program runs and
  finality advances; a network that is still not healthy is purged and started afresh, so one
  module's damage does not reach the next (tests/process_lane.py runs these modules first in the
  group, in its SHARED_ORDER). Anything else that takes the lock in this process
  (``localnet_lock()``) first stops and purges the shared network, and takes the lock over
  without a gap: two networks never run at once.

A failed ``localnet up`` says why in the assertion: ``supervisorctl status`` and the end of the
log of every program that is not RUNNING or that the error names (by name or by a port of its
configuration), read before the state is purged.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ops_tools.chain.status import wait_finality_advances
from tests.localnet_lock import LOCK, held_by_ancestor, localnet_lock, on_lock

ROOT = Path(__file__).resolve().parents[1]
OPS_TOOLS = Path(sys.executable).with_name("ops-tools")
PUBLIC_RPC = "http://127.0.0.1:9944"
LOG_LINES = 30
LOG_CHARS = 6000  # per log: a line of a node's log can be long


def ops(*args: str, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(OPS_TOOLS), *args], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, cwd=ROOT, timeout=timeout, check=False)


def supervisorctl(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The virtualenv's when it has one, else Debian's (scripts/bootstrap installs supervisor).
    beside = Path(sys.executable).with_name("supervisorctl")
    ctl = beside if beside.exists() else shutil.which("supervisorctl") or "supervisorctl"
    return subprocess.run([str(ctl), "-c", str(state / "supervisor" / "supervisord.conf"), *args],
                          capture_output=True, text=True, timeout=60, check=False)


def program_states(state: Path) -> dict[str, str]:
    """Each program supervisord knows, with its state (RUNNING, STOPPED, FATAL, BACKOFF...)."""
    if not (state / "supervisor" / "supervisord.conf").exists():
        return {}
    fields = (line.split() for line in supervisorctl(state, "status").stdout.splitlines())
    return {f[0]: f[1] for f in fields if len(f) >= 2}


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - 64 * 1024))
            text = f.read().decode(errors="replace")
    except OSError as exc:
        return f"(unreadable: {exc})"
    return "\n".join(text.splitlines()[-LOG_LINES:])[-LOG_CHARS:]


def _hosts_configured_with(state: Path, port: str) -> set[str]:
    """The hosts (top directories of the state) whose small configuration files name the port:
    the program that listens there, and those that dial it."""
    hosts: set[str] = set()
    pattern = re.compile(rf"(?<!\d){port}(?!\d)")
    for pattern_glob in ("*/*", "*/*/*"):
        for path in state.glob(pattern_glob):
            if path.suffix not in {".json", ".toml", ".yml", ".yaml", ".conf", ".env", ".ini"}:
                continue
            rel = path.relative_to(state).parts
            if rel[0] == "supervisor":
                continue
            try:
                if path.is_file() and path.stat().st_size < 256 * 1024 \
                        and pattern.search(path.read_text(errors="replace")):
                    hosts.add(rel[0])
            except OSError:
                continue
    return hosts


def named_in(error: str, programs: list[str], state: Path) -> set[str]:
    """The programs an error names: by name, by name without its index (``net-worker`` for
    ``net-worker-0``), or by a loopback port that their host's configuration names."""
    named = set()
    for program in programs:
        stem = re.sub(r"-\d+$", "", program)
        if re.search(rf"(?<![\w-]){re.escape(stem)}(?![\w])", error):
            named.add(program)
    for port in set(re.findall(r"(?:127\.0\.0\.1|localhost):(\d{2,5})", error)):
        for host in _hosts_configured_with(state, port):
            named.update(p for p in programs if p.endswith(host) or f"-{host}-" in p
                         or p == f"net-{host}")
    return named


def diagnose(state: Path, error: str = "") -> str:
    """What the network's supervisord says, and the end of the logs that explain a failure."""
    conf = state / "supervisor" / "supervisord.conf"
    if not conf.exists():
        return f"\n--- no {conf}: the network's supervisord was never configured"
    status = supervisorctl(state, "status")
    out = [f"\n--- supervisorctl status ({state}):\n"
           + (status.stdout.strip() or status.stderr.strip() or f"(exit {status.returncode})")]
    states = program_states(state)
    logs = state / "supervisor" / "logs"
    chosen = sorted({p for p, s in states.items() if s != "RUNNING"}
                    | named_in(error, list(states), state))
    if not states:  # supervisord itself did not answer: its own log says why
        chosen = ["supervisord"]
    for program in chosen:
        files = sorted(logs.glob(f"{program}.log")) + sorted(logs.glob(f"{program}-*.log"))
        if not files:
            out.append(f"\n--- {program} ({states.get(program, '?')}): no log under {logs}")
        for log in files:
            out.append(f"\n--- {log.name} ({states.get(program, '?')}), last {LOG_LINES}"
                       f" lines:\n{_tail(log)}")
    return "".join(out)


def up(env: dict[str, str], *args: str, timeout: float = 900) -> dict[str, Any]:
    """``localnet up --json ARGS``, its answer; on failure an assertion that says why."""
    proc = ops("localnet", "up", *args, "--json", env=env, timeout=timeout)
    if proc.returncode != 0:
        error = proc.stderr[-3000:]
        raise AssertionError(f"localnet up {' '.join(args)} failed (exit {proc.returncode}):\n"
                             f"{error}{diagnose(Path(env['NET_LOCALNET_DIR']), error)}")
    return json.loads(proc.stdout)


def down(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return ops("localnet", "down", "--purge", "--yes", env=env)


@dataclass
class Network:
    env: dict[str, str]  # the environment of ops-tools for this network (NET_LOCALNET_DIR)
    state: Path
    up: dict[str, Any] = field(default_factory=dict)  # the last ``localnet up --json``
    up_s: float = 0.0  # how long that up took (the lock's wait aside)


@contextlib.contextmanager
def started(state: Path, *up_args: str, env: dict[str, str] | None = None,
            timeout: float = 900) -> Iterator[Network]:
    """A network of the caller's own in ``state``, purged at the end by the caller that
    started it (also after a failed start: part of it may run)."""
    env = {**(env if env is not None else os.environ), "NET_LOCALNET_DIR": str(state)}
    with localnet_lock():
        try:
            begun = time.monotonic()
            answer = up(env, *up_args, timeout=timeout)
            yield Network(env, state, answer, time.monotonic() - begun)
        except BaseException:
            down(env)  # the failure in flight is the one to report
            raise
        purged = down(env)
        assert purged.returncode == 0, purged.stderr


def unhealthy(state: Path) -> str | None:
    """Why the network is not fit for the next module, or None: a program that is not RUNNING,
    or finality that does not advance."""
    states = program_states(state)
    if not states:
        return "supervisord knows no program"
    if stopped := {p: s for p, s in states.items() if s != "RUNNING"}:
        return f"programs not running: {stopped}"
    try:
        start, reached = wait_finality_advances(PUBLIC_RPC, 120, blocks=2)
    except Exception as exc:  # any failure here is the reason to start afresh
        return f"finality does not advance: {exc}"
    if reached < start + 2:
        return f"finality does not advance: #{start} -> #{reached}"
    return None


class SharedNetwork:
    """The session's shared network: started by the first module that asks, reused by the next
    ones, stopped and purged when something else takes the lock or at the end of the session."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.env = {**os.environ, "NET_LOCALNET_DIR": str(state)}
        self._fd: int | None = None
        self.starts = 0  # localnet up from nothing (printed: the measure of the sharing)

    @property
    def running(self) -> bool:
        return self._fd is not None

    def _hold(self) -> None:
        # on_lock: before anything else in this process takes the lock, this network goes.
        fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            if not held_by_ancestor(LOCK):
                fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        on_lock.append(self._hand_over)

    def _hand_over(self) -> int | None:
        """Stop and purge the network; the lock's descriptor, still locked, to whoever takes the
        lock next in this process (tests/localnet_lock.py)."""
        fd, self._fd = self._fd, None
        with contextlib.suppress(ValueError):
            on_lock.remove(self._hand_over)
        if fd is None:
            return None
        try:
            purged = down(self.env)
            assert purged.returncode == 0, purged.stderr
        except BaseException:
            os.close(fd)
            raise
        return fd

    def release(self) -> None:
        """Stop and purge the network, and give the lock back."""
        if (fd := self._hand_over()) is not None:
            os.close(fd)

    def _start(self) -> dict[str, Any]:
        self.starts += 1
        try:
            return up(self.env)
        except BaseException:
            self.release()
            raise

    def acquire(self) -> Network:
        """The network, healthy, for a module that leaves it healthy (or restores it)."""
        if not self.running:
            self._hold()
            answer = self._start()
            if (why := unhealthy(self.state)) is not None:
                self.release()
                raise AssertionError(f"the shared local network started but is not healthy:"
                                     f" {why}{diagnose(self.state, why)}")
            return Network(self.env, self.state, answer)
        why = None
        try:
            answer = up(self.env)  # no change: it starts what a previous module left stopped
            why = unhealthy(self.state)
        except AssertionError as exc:
            why = str(exc)
        if why is None:
            return Network(self.env, self.state, answer)
        # A previous module's damage stays with it: a network from nothing.
        print(f"\nthe shared local network is not healthy ({why}); starting it afresh")
        purged = down(self.env)
        assert purged.returncode == 0, purged.stderr
        return Network(self.env, self.state, self._start())


@pytest.fixture(scope="session")
def shared_localnet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedNetwork]:
    shared = SharedNetwork(tmp_path_factory.mktemp("localnet-shared"))
    try:
        yield shared
    finally:
        shared.release()
        print(f"\nthe shared local network was started {shared.starts} time(s)")

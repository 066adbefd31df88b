"""The local network in tests: ``ops-tools localnet up`` on inventories/local (fixed ports, one
at a time on a machine, under /tmp/net-localnet.lock; tests/process_lane.py runs every module
that imports this one on one xdist worker).

``started(state, ...)`` gives a module its own network: it takes the lock, runs ``localnet up
--json``, and ``localnet down --purge --yes`` at the end, whatever happened.

``shared_network(tmp_path_factory)`` gives the default network (a plain ``localnet up``) to the
modules that leave it running (monitoring, drills, backup, deploy's end to end). One ``localnet
up`` from nothing serves them all, each module starting with a no-change ``localnet up`` that
checks it and restarts what is down. A module that starts a network of its own first purges the
shared one (the fixed ports), and the next module that asks for it starts it again. The modules
that use it (through the session fixture ``shared_localnet``) run one after the other
(tests/process_lane.py).

A failed ``localnet up`` says why in the assertion: the status of supervisord's programs and the
end of the log of every program that is not RUNNING or that the error names (by name or by a
port of its configuration), read before the state is purged.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ops_tools.deploy.paths import supervisor_conf
from ops_tools.deploy.supervisor_rpc import ProcessInfo, Supervisor, SupervisorError
from tests import localnet_lock as lock_module
from tests.localnet_lock import localnet_lock

ROOT = Path(__file__).resolve().parents[1]
OPS_TOOLS = Path(sys.executable).with_name("ops-tools")
PUBLIC_RPC = "http://127.0.0.1:9944"
LOG_LINES = 30
LOG_CHARS = 6000  # per log: a line of a node's log can be long


def ops(*args: str, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(OPS_TOOLS), *args], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, cwd=ROOT, timeout=timeout, check=False)


def supervisor(state: Path) -> Supervisor:
    """The network's supervisord, asked over its socket in this process (a ``supervisorctl`` is
    a Python start-up)."""
    return Supervisor(supervisor_conf(state))


def program_states(state: Path) -> dict[str, str]:
    """Each program supervisord knows, with its state (RUNNING, STOPPED, FATAL, BACKOFF...);
    none when no supervisord answers."""
    conf = supervisor_conf(state)
    if not conf.exists():
        return {}
    try:
        return {p.namespec: p.statename for p in Supervisor(conf).processes()}
    except SupervisorError:
        return {}


def _status_table(programs: list[ProcessInfo]) -> str:
    """The programs as ``supervisorctl status`` lists them: name, state, description."""
    width = max((len(p.namespec) for p in programs), default=0) + 3
    return "\n".join(f"{p.namespec:<{width}}{p.statename:<10}{p.description}".rstrip()
                     for p in programs)


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
    try:
        programs = Supervisor(conf).processes()
        status = _status_table(programs) or "(no programs)"
    except SupervisorError as exc:
        programs, status = [], str(exc)
    out = [f"\n--- supervisord status ({state}):\n{status}"]
    states = {p.namespec: p.statename for p in programs}
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


class _Shared:
    """The shared default network of this process, while it runs: its ``started()`` context."""

    stack: contextlib.ExitStack | None = None
    net: Network | None = None

    @classmethod
    def release(cls) -> None:
        stack, cls.stack, cls.net = cls.stack, None, None
        if stack is not None:
            stack.close()


def shared_network(tmp_path_factory: Any) -> Network:
    """The default network, started on first use; later users get it checked and repaired by a
    no-change ``localnet up`` (whose answer is theirs)."""
    net = _Shared.net
    if net is not None:
        begun = time.monotonic()
        net.up = up(net.env)
        net.up_s = time.monotonic() - begun
        return net
    stack = contextlib.ExitStack()
    _Shared.net = stack.enter_context(started(tmp_path_factory.mktemp("shared-localnet")))
    _Shared.stack = stack
    return _Shared.net


release_shared_network = _Shared.release
# Whoever takes the lock for a network of its own purges the shared one first: it holds the
# fixed ports, and this process holds the lock for it.
lock_module.release_shared = _Shared.release

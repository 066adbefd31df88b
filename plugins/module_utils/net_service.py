"""A node service's state on its host: supervisord's XML-RPC over its unix socket, or systemd.

Asking supervisord directly costs milliseconds; ``supervisorctl`` costs a Python start-up per
call, several times per node in every converge.
"""

from __future__ import annotations

import configparser
import http.client
import os
import socket
import subprocess
import xmlrpc.client

# supervisord's process states that mean "this node is up or coming up".
SUPERVISOR_RUNNING = ("RUNNING",)
# States in which a program has stopped and its manager will not start it again: supervisord
# gave up (FATAL) or was told to stop, systemd's unit failed. supervisord's EXITED is not among
# them: with autorestart=unexpected it passes through it on its way to a restart.
STOPPED_FOR_GOOD = ("FATAL", "STOPPED", "failed")


class ServiceStateError(Exception):
    """The service manager could not be asked; the message says why."""


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


class _UnixTransport(xmlrpc.client.Transport):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__()
        self._path = path
        self._timeout = timeout

    def make_connection(self, host: object) -> http.client.HTTPConnection:
        return _UnixConnection(self._path, self._timeout)


def supervisor_socket(conf: str) -> str:
    parser = configparser.RawConfigParser(strict=False)
    try:
        with open(conf, encoding="utf-8") as handle:
            parser.read_file(handle)
    except OSError as exc:
        raise ServiceStateError(f"cannot read {conf}: {exc.strerror}") from None
    url = parser.get("supervisorctl", "serverurl", fallback="")
    if url.startswith("unix://"):
        return url[len("unix://") :]
    path = parser.get("unix_http_server", "file", fallback="")
    if not path:
        raise ServiceStateError(f"{conf} names no unix socket ([unix_http_server] file)")
    return path


def supervisor_proxy(conf: str, timeout: float = 30.0) -> xmlrpc.client.ServerProxy:
    """An XML-RPC client of the supervisord of ``conf`` (its unix socket)."""
    path = supervisor_socket(conf)
    return xmlrpc.client.ServerProxy("http://localhost", transport=_UnixTransport(path, timeout))


def supervisor_apply(conf: str, program: str) -> str:
    """What ``supervisorctl update <program>`` does, for this one program: re-read the program
    files; add the program if new (it autostarts), re-add it if its file changed, remove it if
    its file is gone. Other programs whose files changed are left for their own roles.
    Returns "added", "changed", "removed" or "same"."""
    proxy = supervisor_proxy(conf)
    try:
        added, changed, removed = proxy.supervisor.reloadConfig()[0]
        if program in changed or program in removed:
            try:
                proxy.supervisor.stopProcessGroup(program)
            except xmlrpc.client.Fault as exc:
                if "NOT_RUNNING" not in exc.faultString:
                    raise
            proxy.supervisor.removeProcessGroup(program)
        if program in added or program in changed:
            proxy.supervisor.addProcessGroup(program)
    except xmlrpc.client.Fault as exc:
        raise ServiceStateError(f"supervisord: {exc.faultString}") from None
    except OSError as exc:
        raise ServiceStateError(f"supervisord of {conf} does not answer: {exc}") from None
    for outcome, names in (("added", added), ("changed", changed), ("removed", removed)):
        if program in names:
            return outcome
    return "same"


def supervisor_restart(conf: str, program: str) -> None:
    """Stop (when running) and start ``program``, waiting until supervisord counts it as
    started (its startsecs)."""
    proxy = supervisor_proxy(conf)
    try:
        try:
            proxy.supervisor.stopProcess(program, True)
        except xmlrpc.client.Fault as exc:
            if "NOT_RUNNING" not in exc.faultString:
                raise
        proxy.supervisor.startProcess(program, True)
    except xmlrpc.client.Fault as exc:
        raise ServiceStateError(f"supervisord could not start {program}: {exc.faultString}") \
            from None
    except OSError as exc:
        raise ServiceStateError(f"supervisord of {conf} does not answer: {exc}") from None


def supervisor_state(conf: str, program: str, timeout: float = 5.0) -> str:
    """supervisord's state name of ``program`` (RUNNING, STARTING, BACKOFF, ...); ABSENT when
    supervisord does not know it, UNREACHABLE when no supervisord of ``conf`` answers."""
    try:
        path = supervisor_socket(conf)
    except ServiceStateError:
        return "UNREACHABLE"
    proxy = xmlrpc.client.ServerProxy("http://localhost", transport=_UnixTransport(path, timeout))
    try:
        info = proxy.supervisor.getProcessInfo(program)
    except xmlrpc.client.Fault as exc:
        if "BAD_NAME" in exc.faultString:
            return "ABSENT"
        raise ServiceStateError(f"supervisord: {exc.faultString}") from None
    except OSError:
        return "UNREACHABLE"
    return str(info.get("statename", "UNKNOWN"))


def systemd_state(unit: str) -> str:
    proc = subprocess.run(
        ["systemctl", "is-active", unit], capture_output=True, text=True, check=False
    )
    return (proc.stdout.strip() or proc.stderr.strip() or "unknown").split()[0]


def service_state(manager: str, name: str, supervisor_conf: str = "") -> tuple[str, bool]:
    """(state, running) of the node's service."""
    if manager == "supervisor":
        state = supervisor_state(supervisor_conf, name)
        return state, state in SUPERVISOR_RUNNING
    state = systemd_state(f"{name}.service")
    return state, state == "active"


def program_record(manager: str, name: str, supervisor_conf: str, unit_path: str) -> dict:
    """How the program is started, stopped, restarted and asked for its status (argv each),
    as ops_tools/programs.py reads it from the manifest. "status" is the command whose output
    says whether it runs: supervisorctl status (RUNNING) or systemctl is-active (active)."""
    if manager == "supervisor":
        ctl = ["supervisorctl", "-c", supervisor_conf]
        commands = {a: [*ctl, a, name] for a in ("start", "stop", "restart", "status")}
        where = {"supervisor_conf": supervisor_conf}
    else:
        unit = f"{name}.service"
        commands = {a: ["systemctl", a, unit] for a in ("start", "stop", "restart")}
        commands["status"] = ["systemctl", "is-active", unit]
        where = {}
    if unit_path:
        where["unit_path"] = unit_path
    return {"manager": manager, "name": name, **where, "commands": commands}


def main_pid(manager: str, name: str, supervisor_conf: str = "") -> int | None:
    """The running service's main process id, if it runs."""
    if manager == "supervisor":
        try:
            info = supervisor_proxy(supervisor_conf, 5.0).supervisor.getProcessInfo(name)
        except (xmlrpc.client.Fault, OSError, ServiceStateError):
            return None
        pid = int(info.get("pid") or 0)
    else:
        proc = subprocess.run(
            ["systemctl", "show", "--property=MainPID", "--value", f"{name}.service"],
            capture_output=True, text=True, check=False,
        )
        pid = int(proc.stdout.strip() or 0) if proc.stdout.strip().isdigit() else 0
    return pid or None


def process_started_at(pid: int) -> float | None:
    """When process ``pid`` started (epoch seconds, to the clock tick), from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        with open("/proc/stat") as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith("btime "))
    except (OSError, StopIteration, ValueError):
        return None
    # Field 22 (starttime), counted after the command name, which may hold spaces.
    ticks = int(stat.rsplit(")", 1)[1].split()[19])
    return btime + ticks / os.sysconf("SC_CLK_TCK")


def changed_since(paths: list[str], started: float | None) -> list[str]:
    """Those of ``paths`` written after the process started: what runs is not what is there.
    A process whose start is unknown (not running) is compared with nothing."""
    if started is None:
        return []
    # btime is whole seconds: a second of slack, so a start right after a write (a reset's push
    # then start) does not count as older than the file.
    return [p for p in paths if os.path.exists(p) and os.stat(p).st_mtime > started + 1.0]

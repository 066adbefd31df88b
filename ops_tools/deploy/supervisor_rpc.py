"""supervisord's XML-RPC API over its unix socket, asked in this process.

A ``supervisorctl`` is a Python start-up per call (about 0.15 CPU-s); this is milliseconds.
"""

from __future__ import annotations

import configparser
import http.client
import socket
import xmlrpc.client
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ops_tools.errors import OpsError

QUERY_TIMEOUT_S = 30.0
# A waiting stop lasts up to the program's stopwaitsecs (60 s for a node) before supervisord
# kills it; a stop of every program waits for the slowest.
WAIT_TIMEOUT_S = 120.0

# supervisord's fault codes (supervisor/xmlrpc.py, Faults) that callers tell apart.
SHUTDOWN_STATE = 6
BAD_NAME = 10
ALREADY_STARTED = 60
NOT_RUNNING = 70
SUCCESS = 80


class SupervisorError(OpsError):
    """supervisord could not be asked, or refused; the message says which and what to do."""


class SupervisorUnreachable(SupervisorError):
    """No supervisord answers on the socket of the configuration."""


class SupervisorFault(SupervisorError):
    """supervisord answered with a fault (``code``: supervisor's Faults, e.g. BAD_NAME)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _namespec(group: str, name: str) -> str:
    return name if group == name else f"{group}:{name}"


@dataclass(frozen=True)
class ProcessInfo:
    name: str
    group: str
    statename: str  # RUNNING, STARTING, BACKOFF, STOPPING, STOPPED, EXITED, FATAL, UNKNOWN
    pid: int  # 0 when not running
    description: str

    @property
    def namespec(self) -> str:
        """The name supervisorctl shows and start/stop accept."""
        return _namespec(self.group, self.name)


@dataclass(frozen=True)
class ProcessResult:
    """One program's outcome in a call on all of them (status: supervisor's Faults)."""

    name: str
    group: str
    status: int
    description: str

    @property
    def namespec(self) -> str:
        return _namespec(self.group, self.name)


def socket_path(conf: Path) -> Path:
    """The unix socket of the supervisord of ``conf``: ``[supervisorctl] serverurl`` when it
    is one, else ``[unix_http_server] file``."""
    parser = configparser.RawConfigParser(strict=False, inline_comment_prefixes=(";",))
    try:
        with conf.open(encoding="utf-8") as handle:
            parser.read_file(handle)
    except (OSError, configparser.Error) as exc:
        raise SupervisorUnreachable(
            f"cannot read the supervisord configuration {conf}: {exc}"
        ) from None
    url = parser.get("supervisorctl", "serverurl", fallback="").strip()
    path = url.removeprefix("unix://") if url.startswith("unix://") else ""
    # An http:// serverurl is supervisord's TCP port; its unix socket, if any, is still there.
    path = path or parser.get("unix_http_server", "file", fallback="").strip()
    if not path:
        raise SupervisorError(f"{conf} gives supervisord no unix socket: neither [supervisorctl]"
                              " serverurl=unix://PATH nor [unix_http_server] file=PATH")
    return Path(path.replace("%(here)s", str(conf.parent)))


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(str(self._path))
        except OSError:
            sock.close()
            raise
        self.sock = sock


class _UnixTransport(xmlrpc.client.Transport):
    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__()
        self._path = path
        self._timeout = timeout

    def make_connection(self, host: Any) -> http.client.HTTPConnection:
        # Kept where Transport.close() finds it: the proxy's exit closes the socket.
        self._connection = host, _UnixConnection(self._path, self._timeout)
        return self._connection[1]


class Supervisor:
    """The supervisord of one configuration file; each call is one request on its socket."""

    def __init__(self, conf: Path, timeout: float = QUERY_TIMEOUT_S,
                 wait_timeout: float = WAIT_TIMEOUT_S) -> None:
        self.conf = conf
        self.socket = socket_path(conf)
        self.timeout = timeout
        self.wait_timeout = wait_timeout

    def _call(self, method: str, *args: Any, timeout: float | None = None) -> Any:
        timeout = self.timeout if timeout is None else timeout
        start = f"start it with: supervisord -c {self.conf}"
        try:
            transport = _UnixTransport(self.socket, timeout)
            with xmlrpc.client.ServerProxy("http://localhost", transport=transport) as proxy:
                return getattr(proxy.supervisor, method)(*args)
        except xmlrpc.client.Fault as exc:
            raise SupervisorFault(f"supervisord ({self.socket}) refused {method}:"
                                  f" {exc.faultString}", exc.faultCode) from None
        except FileNotFoundError:
            raise SupervisorUnreachable(f"supervisord of {self.conf} is not running: no socket"
                                        f" at {self.socket}", hint=start) from None
        except ConnectionRefusedError:
            raise SupervisorUnreachable(f"supervisord of {self.conf} is not running: nothing"
                                        f" listens on {self.socket} (a stale socket)",
                                        hint=start) from None
        except TimeoutError:
            raise SupervisorUnreachable(f"supervisord on {self.socket} did not answer {method}"
                                        f" within {timeout:g} s") from None
        except (OSError, http.client.HTTPException, xmlrpc.client.Error) as exc:
            raise SupervisorUnreachable(f"supervisord on {self.socket} could not be asked"
                                        f" {method}: {exc!r}") from None

    def pid(self) -> int:
        """supervisord's own process id."""
        return int(self._call("getPID"))

    def processes(self) -> list[ProcessInfo]:
        return [_info(i) for i in self._call("getAllProcessInfo")]

    def process(self, name: str) -> ProcessInfo:
        """One program (``name`` or ``group:name``); SupervisorFault BAD_NAME if unknown."""
        return _info(self._call("getProcessInfo", name))

    def start(self, name: str, wait: bool = True) -> bool:
        """Start ``name`` (with ``wait``, until supervisord counts it started: its startsecs);
        False when it was already running."""
        try:
            self._call("startProcess", name, wait, timeout=self.wait_timeout)
        except SupervisorFault as exc:
            if exc.code == ALREADY_STARTED:
                return False
            raise
        return True

    def stop(self, name: str, wait: bool = True) -> bool:
        """Stop ``name``; False when it was not running."""
        try:
            self._call("stopProcess", name, wait, timeout=self.wait_timeout)
        except SupervisorFault as exc:
            if exc.code == NOT_RUNNING:
                return False
            raise
        return True

    def restart(self, name: str) -> None:
        """Stop ``name`` if it runs, then start it, waiting for both: ``supervisorctl restart``.
        The stop always waits: supervisord refuses to spawn a program that is still stopping."""
        self.stop(name)
        self.start(name)

    def stop_all(self, wait: bool = True) -> list[ProcessResult]:
        """Stop every running program; the ones that failed to stop (none: all stopped).
        Programs already stopped are no failure: supervisord skips them, and one that stopped
        meanwhile answers NOT_RUNNING."""
        results = self._call("stopAllProcesses", wait, timeout=self.wait_timeout)
        return [r for r in (_result(x) for x in results) if r.status not in (SUCCESS, NOT_RUNNING)]

    def shutdown(self) -> None:
        """Ask supervisord to stop its programs and exit; it answers before it is gone (wait
        for its pid). Already shutting down is no failure."""
        try:
            self._call("shutdown")
        except SupervisorFault as exc:
            if exc.code != SHUTDOWN_STATE:
                raise


def _info(raw: dict[str, Any]) -> ProcessInfo:
    return ProcessInfo(str(raw["name"]), str(raw["group"]), str(raw["statename"]),
                       int(raw.get("pid") or 0), str(raw.get("description", "")))


def _result(raw: dict[str, Any]) -> ProcessResult:
    return ProcessResult(str(raw["name"]), str(raw["group"]), int(raw["status"]),
                         str(raw.get("description", "")))

"""The files and programs of one host, as backup and restore touch them: on this machine
(``ansible_connection: local``, the local network) directly, on a remote machine over ``ssh``
with the inventory's connection variables and ``sudo -n`` (``deploy.ssh``, as the drills).

A remote operation is one ``ssh`` running a small Python program as root on the host
(``REMOTE``): file contents travel as raw bytes on ssh's stdin and stdout (never on a command
line), reads are bounded on the host before anything is sent, a write is atomic (a temporary
file beside the target, renamed) and keeps the target's owner (else its directory's: a node
runs as its own user and must read the key restored for it), and a live SQLite database is
copied on the host through SQLite's backup API, as on this machine.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Protocol

from ops_tools import atomic
from ops_tools.deploy.ssh import Forwards, Machine
from ops_tools.errors import OpsError
from ops_tools.programs import Program

TIMEOUT_S = 600
PROGRAM_TIMEOUT_S = 120
# Exit codes of REMOTE: the path is missing, or larger than the bound asked for.
MISSING, TOO_LARGE = 2, 3

# Run as root on the host: ``python3 -c REMOTE OP PATH [ARGS]``; data in on stdin, out on stdout.
REMOTE = r"""
import hashlib, json, os, pathlib, shutil, sqlite3, sys, tempfile
op, path = sys.argv[1], sys.argv[2]
out = sys.stdout.buffer

def bounded(f, limit):
    data = f.read(limit + 1)
    if len(data) > limit:
        sys.exit(3)
    return data

def owner(p):
    while True:
        try:
            st = os.stat(p)
            return st.st_uid, st.st_gid
        except FileNotFoundError:
            p = os.path.dirname(p)

if op == "read":
    try:
        f = open(path, "rb")
    except (FileNotFoundError, IsADirectoryError):
        sys.exit(2)
    with f:
        out.write(bounded(f, int(sys.argv[3])))
elif op == "sha256":
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except FileNotFoundError:
        sys.exit(2)
    out.write(h.hexdigest().encode())
elif op == "list":
    if not os.path.isdir(path) or os.path.islink(path):
        sys.exit(2)
    names = sorted(e.name for e in os.scandir(path) if e.is_file(follow_symlinks=False))
    out.write(json.dumps(names).encode())
elif op == "exists":
    sys.exit(0 if os.path.lexists(path) else 2)
elif op == "write":
    mode, dir_mode = int(sys.argv[3], 8), int(sys.argv[4], 8)
    data = sys.stdin.buffer.read()
    uid, gid = owner(path)
    parent, missing = os.path.dirname(path), []
    while not os.path.isdir(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    for d in reversed(missing):
        os.mkdir(d, dir_mode)
        os.chown(d, uid, gid)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".restore-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.chown(tmp, uid, gid)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
elif op == "remove":
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)
elif op == "sqlite":
    if not os.path.isfile(path):
        sys.exit(2)
    scratch = tempfile.mkdtemp(prefix="net-backup-")
    try:
        os.chmod(scratch, 0o700)
        source = sqlite3.connect(pathlib.Path(path).resolve().as_uri() + "?mode=rw", uri=True,
                                 timeout=30)
        try:
            target = sqlite3.connect(os.path.join(scratch, "copy.db"))
            try:
                source.backup(target)
            finally:
                target.close()
        finally:
            source.close()
        with open(os.path.join(scratch, "copy.db"), "rb") as f:
            out.write(bounded(f, int(sys.argv[3])))
    finally:
        shutil.rmtree(scratch)
else:
    sys.exit(64)
"""


class HostIO(Protocol):
    """What backup and restore do on a host."""

    where: str

    def read(self, path: Path, limit: int, what: str) -> bytes | None: ...
    def sha256(self, path: Path) -> str | None: ...
    def files(self, path: Path) -> list[str] | None: ...
    def exists(self, path: Path) -> bool: ...
    def write(self, path: Path, data: bytes, mode: int, dir_mode: int = 0o700) -> None: ...
    def remove(self, path: Path) -> None: ...
    def sqlite_copy(self, path: Path, limit: int) -> bytes | None: ...
    def program(self, program: Program, action: str) -> subprocess.CompletedProcess[str]: ...
    def url(self, port: int) -> str: ...
    def close(self) -> None: ...


def _too_large(what: str, path: Path, limit: int) -> OpsError:
    return OpsError(f"{what}: {path} is larger than {limit} bytes; not what a backup saves")


class LocalIO:
    """This machine's files and programs."""

    where = "this machine"

    def read(self, path: Path, limit: int, what: str) -> bytes | None:
        try:
            with path.open("rb") as fh:
                data = fh.read(limit + 1)
        except (FileNotFoundError, IsADirectoryError):
            return None
        except OSError as exc:
            raise OpsError(f"{what}: cannot read {path} ({exc.strerror})") from None
        if len(data) > limit:
            raise _too_large(what, path, limit)
        return data

    def sha256(self, path: Path) -> str | None:
        try:
            with path.open("rb") as fh:
                return hashlib.file_digest(fh, "sha256").hexdigest()
        except (FileNotFoundError, IsADirectoryError):
            return None

    def files(self, path: Path) -> list[str] | None:
        if not path.is_dir() or path.is_symlink():
            return None
        return sorted(p.name for p in path.iterdir() if p.is_file() and not p.is_symlink())

    def exists(self, path: Path) -> bool:
        return path.exists() or path.is_symlink()

    def write(self, path: Path, data: bytes, mode: int, dir_mode: int = 0o700) -> None:
        path.parent.mkdir(mode=dir_mode, parents=True, exist_ok=True)
        atomic.write_bytes(path, data, mode=mode)

    def remove(self, path: Path) -> None:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def sqlite_copy(self, path: Path, limit: int) -> bytes | None:
        if not path.is_file():
            return None
        with tempfile.TemporaryDirectory(prefix="net-backup-") as tmp:
            os.chmod(tmp, 0o700)
            copy = Path(tmp) / "copy.db"
            # mode=rw: never create an empty database where the service's is missing
            source = sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True, timeout=30)
            try:
                target = sqlite3.connect(copy)
                try:
                    source.backup(target)
                finally:
                    target.close()
            finally:
                source.close()
            return self.read(copy, limit, f"the copy of {path}")

    def program(self, program: Program, action: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(program.argv(action, local=True), capture_output=True, text=True,
                              timeout=PROGRAM_TIMEOUT_S, check=False)

    def url(self, port: int) -> str:
        return f"http://127.0.0.1:{int(port)}"

    def close(self) -> None:
        """Nothing held open."""


class SshIO:
    """A remote machine's files and programs, over ``ssh`` as root (``sudo -n``)."""

    def __init__(self, machine: Machine) -> None:
        self.machine = machine
        self.where = f"{machine.host} ({machine.address})"
        self._forwards = Forwards()

    def _transport(self) -> list[str]:
        """The command that runs a shell line on the machine."""
        return self.machine.argv()

    def _root(self, line: str) -> str:
        return line if self.machine.user in (None, "root") else f"sudo -n {line}"

    def _call(self, op: str, path: Path, *args: str, data: bytes = b"",
              what: str = "") -> tuple[int, bytes]:
        line = self._root(shlex.join(["python3", "-c", REMOTE, op, str(path), *args]))
        try:
            proc = subprocess.run([*self._transport(), line], input=data, capture_output=True,
                                  timeout=TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise OpsError(f"{self.where}: {op} {path} did not finish in {TIMEOUT_S} s over"
                           " ssh") from None
        err = proc.stderr.decode(errors="replace").strip()
        if proc.returncode == 255:
            raise OpsError(f"{self.where}: ssh failed: {err[-300:]}; check that `ssh"
                           f" {shlex.join(self.machine.argv()[1:])} true` works")
        if proc.returncode not in (0, MISSING, TOO_LARGE):
            raise OpsError(f"{self.where}: {what or op} {path} failed: {err[-500:]}")
        return proc.returncode, proc.stdout

    def read(self, path: Path, limit: int, what: str) -> bytes | None:
        code, out = self._call("read", path, str(limit), what=what)
        if code == TOO_LARGE:
            raise _too_large(f"{what} on {self.where}", path, limit)
        return None if code == MISSING else out

    def sha256(self, path: Path) -> str | None:
        code, out = self._call("sha256", path)
        return None if code == MISSING else out.decode().strip()

    def files(self, path: Path) -> list[str] | None:
        code, out = self._call("list", path)
        if code == MISSING:
            return None
        names = json.loads(out)
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise OpsError(f"{self.where}: the listing of {path} is not a list of names")
        return names

    def exists(self, path: Path) -> bool:
        return self._call("exists", path)[0] == 0

    def write(self, path: Path, data: bytes, mode: int, dir_mode: int = 0o700) -> None:
        self._call("write", path, f"{mode:o}", f"{dir_mode:o}", data=data, what="writing")

    def remove(self, path: Path) -> None:
        self._call("remove", path, what="removing")

    def sqlite_copy(self, path: Path, limit: int) -> bytes | None:
        code, out = self._call("sqlite", path, str(limit), what="copying the database")
        if code == TOO_LARGE:
            raise _too_large(f"the copy of the database on {self.where}", path, limit)
        return None if code == MISSING else out

    def program(self, program: Program, action: str) -> subprocess.CompletedProcess[str]:
        return self.machine.run(shlex.join(program.argv(action)), timeout=PROGRAM_TIMEOUT_S)

    def url(self, port: int) -> str:
        """A port of the machine's loopback (a node's RPC), through a local forward."""
        return f"http://127.0.0.1:{self._forwards.port(self.machine, int(port))}"

    def close(self) -> None:
        self._forwards.close()


LOCAL = LocalIO()


def of(host: str, hostvars: dict[str, Any]) -> HostIO:
    """The host as its inventory reaches it: this machine for ``ansible_connection: local``,
    else over ssh."""
    if hostvars.get("ansible_connection") == "local":
        return LOCAL
    return SshIO(Machine.of(host, hostvars))

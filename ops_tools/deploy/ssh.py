"""The machines of a remote inventory as the drills and the backup reach them: ``ssh`` with
the inventory's connection variables (``ansible_host``, ``ansible_port``, ``ansible_user``,
``ansible_ssh_private_key_file``, ``ansible_ssh_common_args``), in batch mode, host keys checked
as the user's SSH configuration checks them (never added), and ``sudo -n`` for what needs root,
as Ansible's ``become``. A node's RPC and the monitoring listen on their machine's loopback
only: a drill (and the key-loss drill) reaches them through local port forwards
(``ssh -N -L``), each a process of its own stopped by its PID when the drill ends.
"""

from __future__ import annotations

import contextlib
import shlex
import socket
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from ops_tools.errors import InputError, OpsError

COMMAND_TIMEOUT_S = 120
FORWARD_READY_S = 30.0
OUTPUT_LIMIT = 1 << 20  # a manifest or a rule listing; anything bigger is not what was asked


class SshError(OpsError):
    pass


def _plain(hostvars: dict[str, Any], key: str) -> str | None:
    value = hostvars.get(key)
    if value is None or value == "":
        return None
    if "{{" in str(value):
        raise InputError(f"{key} is templated ({value!r}); the drill reads the inventory"
                         " without templating: set it to a plain value")
    return str(value)


@dataclass(frozen=True)
class Machine:
    """The machine behind an inventory host, as ``ssh`` reaches it."""

    host: str  # the inventory host it was read from
    address: str
    port: int = 22
    user: str | None = None
    key_file: str | None = None
    common_args: tuple[str, ...] = ()

    @classmethod
    def of(cls, host: str, hostvars: dict[str, Any]) -> Machine:
        connection = hostvars.get("ansible_connection")
        if connection not in (None, "ssh", "smart"):
            raise InputError(f"host {host} is reached over {connection!r}; remote drills reach"
                             " hosts over ssh (ansible_connection: ssh)")
        port = _plain(hostvars, "ansible_port") or "22"
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise InputError(f"host {host}: ansible_port {port!r} is not a TCP port")
        return cls(host=host, address=_plain(hostvars, "ansible_host") or host, port=int(port),
                   user=_plain(hostvars, "ansible_user"),
                   key_file=_plain(hostvars, "ansible_ssh_private_key_file"),
                   common_args=tuple(shlex.split(_plain(hostvars, "ansible_ssh_common_args")
                                                 or "")))

    @property
    def key(self) -> tuple[str, int, str | None]:
        """Inventory hosts with the same key are one machine."""
        return self.address, self.port, self.user

    def argv(self, *options: str) -> list[str]:
        argv = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
                "-o", "ServerAliveInterval=10", "-p", str(self.port)]
        if self.key_file:
            argv += ["-i", self.key_file, "-o", "IdentitiesOnly=yes"]
        if self.user:
            argv += ["-l", self.user]
        return [*argv, *self.common_args, *options, self.address]

    def run(self, command: str, *, root: bool = True,
            timeout: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        """``command`` in a shell on the machine (as root through ``sudo -n`` unless the login
        is root). Its stdin is empty; nothing secret goes on its command line."""
        line = command
        if root and self.user not in (None, "root"):
            line = f"sudo -n sh -c {shlex.quote(command)}"
        try:
            proc = subprocess.run([*self.argv(), line], capture_output=True, text=True,
                                  timeout=timeout, check=False, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise SshError(f"{self.host}: `{command.splitlines()[0]}` did not finish in"
                           f" {timeout:.0f} s over ssh") from None
        if proc.returncode == 255:
            raise SshError(f"{self.host}: ssh to {self.address}:{self.port} failed:"
                           f" {proc.stderr.strip()[-300:]}; check that `ssh"
                           f" {shlex.join(self.argv()[1:])} true` works")
        if len(proc.stdout) > OUTPUT_LIMIT:
            raise SshError(f"{self.host}: `{command.splitlines()[0]}` printed more than"
                           f" {OUTPUT_LIMIT} bytes")
        return proc


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


class Forwards:
    """Local ports forwarded to ports on machines' loopback, one ``ssh -N`` each, stopped (by
    PID) by ``close``."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.ports: dict[tuple[tuple[str, int, str | None], int], int] = {}

    def port(self, machine: Machine, remote_port: int) -> int:
        """The local port that reaches ``remote_port`` on the machine's loopback."""
        key = (machine.key, int(remote_port))
        if key in self.ports:
            return self.ports[key]
        for _attempt in range(3):  # another process may take the free port before ssh binds it
            local = _free_port()
            proc = subprocess.Popen(
                machine.argv("-N", "-o", "ExitOnForwardFailure=yes",
                             "-L", f"127.0.0.1:{local}:127.0.0.1:{int(remote_port)}"),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            self.procs.append(proc)
            deadline = time.monotonic() + FORWARD_READY_S
            while time.monotonic() < deadline and proc.poll() is None:
                if _accepts(local):
                    self.ports[key] = local
                    return local
                time.sleep(0.1)
            err = b""
            if proc.poll() is not None and proc.stderr is not None:
                err = proc.stderr.read()[-300:]
            self._stop(proc)
            if b"Address already in use" not in err:
                why = err.decode(errors="replace").strip() or "no answer in time"
                raise SshError(f"{machine.host}: forwarding 127.0.0.1:{local} to its port"
                               f" {remote_port} failed: {why}")
        raise SshError(f"{machine.host}: no local port could be forwarded to {remote_port}")

    @staticmethod
    def _stop(proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stderr is not None:
            with contextlib.suppress(OSError):
                proc.stderr.close()

    def close(self) -> None:
        for proc in self.procs:
            self._stop(proc)
        self.procs.clear()
        self.ports.clear()

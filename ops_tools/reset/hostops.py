"""The time-critical host operations of a reset (stop, purge, push, start), run with pyinfra on
the machines of an Ansible inventory, driven by the host manifests the roles wrote.

Several inventory hosts can live on one machine (``inventories/local`` puts every node on this
one): they share one pyinfra host, and their commands run in inventory order on it, while
different machines run in parallel.
"""

from __future__ import annotations

import contextlib
import json
import shlex
from pathlib import Path
from typing import Any

from pyinfra.api import Config, State
from pyinfra.api import Inventory as PyInventory
from pyinfra.api.connect import connect_all, disconnect_all
from pyinfra.api.exceptions import PyinfraError
from pyinfra.api.operation import add_op
from pyinfra.api.operations import run_ops
from pyinfra.facts.server import Command
from pyinfra.operations import files, server

from ops_tools.deploy.inventory import Inventory
from ops_tools.reset.nodes import LOCAL, HostOpFailed, Node, machine_of

# Posts argv[2] to argv[1] and prints the answer; prints nothing when the node does not answer.
_RPC_CLIENT = (
    "import sys, urllib.request as u\n"
    "r = u.Request(sys.argv[1], sys.argv[2].encode(), {'Content-Type': 'application/json'})\n"
    "try:\n"
    "    print(u.urlopen(r, timeout=5).read().decode())\n"
    "except Exception:\n"
    "    pass\n"
)

__all__ = ["LOCAL", "HostOpFailed", "Machines", "Node", "machine_of"]


class Machines:
    """A pyinfra session over the machines behind an inventory's hosts."""

    def __init__(self, inventory: Inventory, hosts: list[str]) -> None:
        self.machine_of: dict[str, str] = {}
        names: dict[str, dict[str, Any]] = {}
        for host in hosts:
            name, data = machine_of(inventory.hostvars.get(host, {}), host)
            self.machine_of[host] = name
            names.setdefault(name, data)
        self._names: list[Any] = [(n, d) for n, d in names.items() if n != LOCAL]
        if LOCAL in names:
            self._names.append(LOCAL)
        # Facts (command output) go through one long-lived session; each batch of operations
        # gets a session of its own, since pyinfra's run_ops runs every operation of its state.
        self._inventory, self.state = self._session()

    def _session(self) -> tuple[PyInventory, State]:
        inventory = PyInventory((list(self._names), {}))
        state = State(inventory, Config(CONNECT_TIMEOUT=10))
        # When no machine connects, pyinfra raises instead of marking them failed.
        with contextlib.suppress(PyinfraError):
            connect_all(state)
        failed = [h.name for h in state.failed_hosts]
        if failed:
            disconnect_all(state)
            raise HostOpFailed(f"cannot connect to {', '.join(failed)}")
        return inventory, state

    def __enter__(self) -> Machines:
        return self

    def __exit__(self, *exc: object) -> None:
        disconnect_all(self.state)

    def _py(self, host: str) -> Any:
        return self._inventory.get_host(self.machine_of[host])

    def output(self, host: str, command: str) -> str:
        """Stdout of ``command`` on the machine of ``host`` (raises with stderr on failure)."""
        try:
            out = self._py(host).get_fact(Command, command=command)
        except PyinfraError as exc:
            raise HostOpFailed(f"{host}: '{command}' failed: {exc}") from None
        return out or ""

    def read_json(self, host: str, path: str) -> dict[str, Any] | None:
        try:
            text = self.output(host, f"cat {shlex.quote(path)} 2>/dev/null || true")
            return json.loads(text) if text.strip() else None
        except json.JSONDecodeError:
            return None

    def rpc(self, host: str, port: int, method: str, params: list[Any] | None = None) -> Any:
        """JSON-RPC on the host's own loopback (authorities expose RPC nowhere else), asked with
        the host's python3 (which Ansible needs there anyway; curl may be missing)."""
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []})
        cmd = shlex.join(["python3", "-c", _RPC_CLIENT, f"http://127.0.0.1:{port}", body])
        text = self.output(host, f"{cmd} || true")
        try:
            reply = json.loads(text)
        except json.JSONDecodeError:
            return None
        return reply.get("result") if isinstance(reply, dict) else None

    def sha256(self, host: str, path: str) -> str:
        """The sha256 of ``path`` on the machine of ``host``."""
        return self.output(host, f"sha256sum {shlex.quote(path)}").split(" ")[0]

    def free_bytes(self, host: str, path: str) -> int:
        out = self.output(host, f"df -B1 --output=avail {shlex.quote(path)} | tail -1")
        return int(out.strip() or 0)

    def run(self, what: str, commands: dict[str, list[str]], *, parallel: bool = False) -> None:
        """Run each host's commands (in order on each machine, machines in parallel; with
        ``parallel``, a machine's commands run at once too, and fail if any of them fails)."""
        per_machine: dict[str, list[str]] = {}
        for host, cmds in commands.items():
            per_machine.setdefault(self.machine_of[host], []).extend(cmds)
        if parallel:
            per_machine = {m: [_all_at_once(cmds)] for m, cmds in per_machine.items() if cmds}
        ops = [
            (machine, server.shell, {"commands": cmds})
            for machine, cmds in per_machine.items()
            if cmds
        ]
        self._execute(what, ops)

    def put(self, what: str, uploads: dict[str, list[tuple[Path, str, str]]]) -> None:
        """Upload ``(local file, remote path, mode)`` per host."""
        ops = [
            (self.machine_of[host], files.put, {"src": str(src), "dest": dest, "mode": mode})
            for host, items in uploads.items()
            for src, dest, mode in items
        ]
        self._execute(what, ops)

    def _execute(self, what: str, ops: list[tuple[str, Any, dict[str, Any]]]) -> None:
        if not ops:
            return
        inventory, state = self._session()
        try:
            metas: list[tuple[str, Any]] = []
            for machine, op, kwargs in ops:
                added = add_op(state, op, name=what, host=inventory.get_host(machine), **kwargs)
                metas += [(host.name, meta) for host, meta in added.items()]
            with contextlib.suppress(PyinfraError):  # the per-host results below say what failed
                run_ops(state)
        finally:
            disconnect_all(state)
        failed = [
            f"{name}: {meta.stderr.strip() or 'failed'}"
            for name, meta in metas
            if not meta.did_succeed(_raise_if_not_complete=False)
        ]
        if failed:
            raise HostOpFailed(f"{what} failed on " + "; ".join(failed))


def _all_at_once(commands: list[str]) -> str:
    """One shell command that runs ``commands`` as background jobs and fails if any fails."""
    jobs = "".join(f'( {c} ) & pids="$pids $!"; ' for c in commands)
    return f'pids=""; {jobs}rc=0; for p in $pids; do wait "$p" || rc=1; done; exit $rc'

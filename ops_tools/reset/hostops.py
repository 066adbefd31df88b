"""The time-critical host operations of a reset (stop, purge, push, start), run with pyinfra on
the machines of an Ansible inventory, driven by the host manifests the roles wrote.

Several inventory hosts can live on one machine (``inventories/local`` puts every node on this
one): they share one pyinfra host, and their commands run in inventory order on it, while
different machines run in parallel (a thread each: pyinfra's greenlets do not overlap SSH
sessions in a process that gevent has not patched). Every command and upload goes over the one
connection per machine opened with the session: a new SSH session per batch cost each batch a
handshake per machine, inside the downtime.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import subprocess
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from paramiko import SSHException
from pyinfra.api import Config, State, StringCommand
from pyinfra.api import Inventory as PyInventory
from pyinfra.api.arguments import CONNECTOR_ARGUMENT_KEYS, pop_global_arguments
from pyinfra.api.connect import connect_all, disconnect_all
from pyinfra.api.exceptions import PyinfraError

from ops_tools.deploy.inventory import Inventory
from ops_tools.reset.nodes import LOCAL, HostOpFailed, Node, machine_of
from ops_tools.reset.shell import all_at_once, in_order

# Posts argv[2] to argv[1] and prints the answer; prints nothing when the node does not answer.
_RPC_CLIENT = (
    "import sys, urllib.request as u\n"
    "r = u.Request(sys.argv[1], sys.argv[2].encode(), {'Content-Type': 'application/json'})\n"
    "try:\n"
    "    print(u.urlopen(r, timeout=5).read().decode())\n"
    "except Exception:\n"
    "    pass\n"
)

# Prints [genesis, best, finalized] of the node at argv[1] (null for what it does not answer).
_HEIGHTS_CLIENT = (
    "import json, sys, urllib.request as u\n"
    "def call(m, p=()):\n"
    "    b = json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': m, 'params': list(p)}).encode()\n"
    "    r = u.Request(sys.argv[1], b, {'Content-Type': 'application/json'})\n"
    "    try:\n"
    "        return json.load(u.urlopen(r, timeout=5)).get('result')\n"
    "    except Exception:\n"
    "        return None\n"
    "def num(h):\n"
    "    return int(h['number'], 16) if isinstance(h, dict) else None\n"
    "g = call('chain_getBlockHash', [0])\n"
    "f = call('chain_getFinalizedHead') if g else None\n"
    "print(json.dumps([g, num(call('chain_getHeader')) if g else None,"
    " num(call('chain_getHeader', [f])) if f else None]))\n"
)

# Waits on the host until the node at argv[1] serves genesis argv[2] with best >= argv[3] and
# (argv[4] >= 0) finalized >= argv[4], polling its loopback every argv[6] s for at most argv[5]
# s; prints [met, genesis, best, finalized] once. One process and one round trip for the whole
# wait: polling from the controller cost an SSH command and a Python start-up per poll, on the
# CPU the starting node needs, and up to a poll's length of detection.
_WAIT_CLIENT = _HEIGHTS_CLIENT.split("g = call(")[0] + (
    "import time\n"
    "def heights():\n"
    "    g = call('chain_getBlockHash', [0])\n"
    "    f = call('chain_getFinalizedHead') if g else None\n"
    "    return [g, num(call('chain_getHeader')) if g else None,"
    " num(call('chain_getHeader', [f])) if f else None]\n"
    "want, best, fin = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])\n"
    "end = time.monotonic() + float(sys.argv[5])\n"
    "while True:\n"
    "    h = heights()\n"
    "    met = (h[0] == want and h[1] is not None and h[1] >= best\n"
    "           and (fin < 0 or (h[2] is not None and h[2] >= fin)))\n"
    "    if met or time.monotonic() >= end:\n"
    "        print(json.dumps([met] + h))\n"
    "        break\n"
    "    time.sleep(float(sys.argv[6]))\n"
)
# Between two polls of a node by _WAIT_CLIENT on its host (HTTP on loopback, in process).
HOST_POLL_S = 0.1

__all__ = ["LOCAL", "HostOpFailed", "Machines", "Node", "machine_of"]


T = TypeVar("T")
# An upload's temporary name beside its destination (renamed into place once complete).
_PART = ".part-"


class Machines:
    """A pyinfra session over the machines behind an inventory's hosts: one connection per
    machine for the cycle's life."""

    def __init__(self, inventory: Inventory, hosts: list[str]) -> None:
        self.machine_of: dict[str, str] = {}
        names: dict[str, dict[str, Any]] = {}
        # Each machine by its first inventory host: how the breakdown names it.
        self._label: dict[str, str] = {}
        for host in hosts:
            name, data = machine_of(inventory.hostvars.get(host, {}), host)
            self.machine_of[host] = name
            names.setdefault(name, data)
            self._label.setdefault(name, host)
        self._names: list[Any] = [(n, d) for n, d in names.items() if n != LOCAL]
        if LOCAL in names:
            self._names.append(LOCAL)
        # Told of each batch (what, epoch start, seconds): the cycle's downtime breakdown.
        self.on_batch: Callable[[str, float, float], None] = lambda *_: None
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

    def _shell(self, machine: str, command: str) -> tuple[bool, str, str]:
        """(succeeded, stdout, stderr) of ``command`` on ``machine``, over its connection, with
        the become settings of its host data (sudo) as pyinfra's own operations apply them."""
        host = self._inventory.get_host(machine)
        arguments, _ = pop_global_arguments(self.state, host, {})
        connector = {k: v for k, v in arguments.items() if k in CONNECTOR_ARGUMENT_KEYS}
        try:
            ok, out = host.run_shell_command(StringCommand(command), **connector)
        except (OSError, SSHException, PyinfraError) as exc:
            return False, "", f"{type(exc).__name__}: {exc}"
        return ok, "\n".join(out.stdout_lines), "\n".join(out.stderr_lines)

    def _on_each(self, work: dict[str, T], act: Callable[[str, T], Any],
                 took: dict[str, float] | None = None) -> dict[str, Any]:
        """``act(machine, work)`` for every machine at once: a thread per remote machine, this
        thread for this one (pyinfra's local connector runs its processes under gevent, whose
        child watcher lives in the main thread). The result or the exception, per machine;
        the seconds each one took into ``took``."""
        results: dict[str, Any] = {}
        took = {} if took is None else took

        def call(machine: str) -> Any:
            t0 = time.monotonic()
            try:
                return act(machine, work[machine])
            except Exception as exc:  # reported per machine by the caller
                return exc
            finally:
                took[machine] = time.monotonic() - t0

        remote = [m for m in work if m != LOCAL]
        with ThreadPoolExecutor(max_workers=max(1, len(remote)),
                                thread_name_prefix="reset-host") as pool:
            futures = {m: pool.submit(call, m) for m in remote}
            if LOCAL in work:
                results[LOCAL] = call(LOCAL)
            results.update({m: f.result() for m, f in futures.items()})
        return results

    def _py(self, host: str) -> Any:
        return self._inventory.get_host(self.machine_of[host])

    def output(self, host: str, command: str) -> str:
        """Stdout of ``command`` on the machine of ``host`` (raises with stderr on failure)."""
        ok, out, err = self._shell(self.machine_of[host], command)
        if not ok:
            raise HostOpFailed(f"{host}: '{command}' failed: {err.strip() or 'non-zero exit'}")
        return out

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

    def heights(self, host: str, port: int) -> tuple[str | None, int | None, int | None]:
        """(genesis, best, finalized) of the node on the host's loopback, in one command: the
        waits inside the downtime poll it, and four commands over SSH cost four round trips."""
        cmd = shlex.join(["python3", "-c", _HEIGHTS_CLIENT, f"http://127.0.0.1:{port}"])
        try:
            got = json.loads(self.output(host, f"{cmd} || true") or "null")
        except (json.JSONDecodeError, HostOpFailed):
            return None, None, None
        if not isinstance(got, list) or len(got) != 3:
            return None, None, None
        genesis, best, finalized = got
        return (genesis if isinstance(genesis, str) else None,
                best if isinstance(best, int) else None,
                finalized if isinstance(finalized, int) else None)

    def wait_heights(self, host: str, port: int, genesis: str, min_best: int,
                     min_finalized: int | None, timeout_s: float,
                     ) -> tuple[bool, tuple[str | None, int | None, int | None]]:
        """Waits on the host (one command) until its node serves ``genesis`` with best >=
        ``min_best`` and finalized >= ``min_finalized`` (when given), for at most
        ``timeout_s``: (met, (genesis, best, finalized) last seen)."""
        cmd = shlex.join(["python3", "-c", _WAIT_CLIENT, f"http://127.0.0.1:{port}", genesis,
                          str(min_best), str(-1 if min_finalized is None else min_finalized),
                          str(timeout_s), str(HOST_POLL_S)])
        got = json.loads(self.output(host, cmd) or "null")
        if not isinstance(got, list) or len(got) != 4:
            raise HostOpFailed(f"{host}: the wait for its node answered {got!r}")
        met, g, best, fin = got
        return (met is True, (g if isinstance(g, str) else None,
                              best if isinstance(best, int) else None,
                              fin if isinstance(fin, int) else None))

    def sha256(self, host: str, path: str) -> str:
        """The sha256 of ``path`` on the machine of ``host``."""
        return self.output(host, f"sha256sum {shlex.quote(path)}").split(" ")[0]

    def free_bytes(self, host: str, path: str) -> int:
        out = self.output(host, f"df -B1 --output=avail {shlex.quote(path)} | tail -1")
        return int(out.strip() or 0)

    def run(self, what: str, commands: dict[str, list[str]], *,
            parallel: bool = False) -> dict[str, str]:
        """Run each host's commands (in order on each machine, machines in parallel; with
        ``parallel``, a machine's commands run at once too, and fail if any of them fails):
        one command per machine over its connection. Returns each machine's stdout."""
        outputs, step = self._batch(what, commands, parallel)
        if step is not None:
            self.on_batch(*step)
        return outputs

    def run_later(self, what: str, commands: dict[str, list[str]], *,
                  parallel: bool = False) -> Future[tuple[dict[str, str], Any]]:
        """``run`` in a thread of its own, over the same connections, while this thread goes
        on: its result (outputs and the timed step, for ``on_batch`` once awaited) or its
        HostOpFailed comes from the future. pyinfra's local connector runs its processes in
        the main thread, so this machine's commands run as plain child processes instead (as
        the local connector's: the same user, no become; ``machine_of``)."""
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reset-later")
        future = pool.submit(self._batch, what, commands, parallel, direct_local=True)
        pool.shutdown(wait=False)
        return future

    def _direct(self, machine: str, command: str) -> tuple[bool, str, str]:
        """``_shell`` for this machine as a child process of this one (any thread may wait
        on it: no gevent here), other machines over their connections."""
        if machine != LOCAL:
            return self._shell(machine, command)
        proc = subprocess.run(["sh", "-c", command], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, check=False)
        return proc.returncode == 0, proc.stdout.rstrip("\n"), proc.stderr

    def _batch(self, what: str, commands: dict[str, list[str]], parallel: bool,
               direct_local: bool = False,
               ) -> tuple[dict[str, str], tuple[str, float, float] | None]:
        per_machine: dict[str, list[str]] = {}
        for host, cmds in commands.items():
            per_machine.setdefault(self.machine_of[host], []).extend(cmds)
        batch = {m: (all_at_once(cmds) if parallel else in_order(cmds))
                 for m, cmds in per_machine.items() if cmds}
        if not batch:
            return {}, None
        started, t0, took = time.time(), time.monotonic(), {}
        results = self._on_each(batch, self._direct if direct_local else self._shell, took)
        step = (self._step(what, took), started, time.monotonic() - t0)
        failed, outputs = [], {}
        for machine, result in results.items():
            if isinstance(result, Exception):
                failed.append(f"{machine}: {result}")
                continue
            ok, out, err = result
            outputs[machine] = out
            if not ok:
                failed.append(f"{machine}: {err.strip() or out.strip() or 'failed'}")
        if failed:
            raise HostOpFailed(f"{what} failed on " + "; ".join(failed))
        return outputs, step

    def _step(self, what: str, took: dict[str, float]) -> str:
        """The batch's name in the breakdown; with several machines, what each one took, the
        slowest (the batch's length) first."""
        if len(took) < 2:
            return what
        each = ", ".join(f"{self._label.get(m, m)} {s:.2f}"
                         for m, s in sorted(took.items(), key=lambda kv: -kv[1]))
        return f"{what} ({each})"

    def put(self, what: str, uploads: dict[str, list[tuple[Path, str, str]]]) -> None:
        """Upload ``(local file, remote path, mode)`` per host, machines in parallel; each file
        goes to a temporary name beside its destination and is renamed into place complete."""
        per_machine: dict[str, list[tuple[Path, str, str]]] = {}
        for host, items in uploads.items():
            per_machine.setdefault(self.machine_of[host], []).extend(items)
        if not any(per_machine.values()):
            return
        started, t0, took = time.time(), time.monotonic(), {}
        results = self._on_each(per_machine, self._upload, took)
        self.on_batch(self._step(what, took), started, time.monotonic() - t0)
        failed = [f"{m}: {r}" for m, r in results.items() if isinstance(r, Exception)]
        if failed:
            raise HostOpFailed(f"{what} failed on " + "; ".join(failed))

    def _upload(self, machine: str, items: list[tuple[Path, str, str]]) -> None:
        host = self._inventory.get_host(machine)
        arguments, _ = pop_global_arguments(self.state, host, {})
        connector = {k: v for k, v in arguments.items() if k in CONNECTOR_ARGUMENT_KEYS}
        for src, dest, mode in items:
            part = f"{dest}{_PART}{uuid.uuid4().hex[:8]}"
            if not host.put_file(str(src), part, **connector):
                raise HostOpFailed(f"upload of {src} to {part} failed")
            ok, _, err = self._shell(machine, shlex.join(["chmod", mode, part]) + " && "
                                     + shlex.join(["mv", "-f", part, dest]))
            if not ok:
                self._shell(machine, shlex.join(["rm", "-f", part]))
                raise HostOpFailed(f"{dest}: {err.strip() or 'could not be put in place'}")


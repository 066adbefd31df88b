"""The reset's downtime window: the one command a node's host runs in it, and the breakdown of
the window that the cycle reports.

The command runs in a real shell on files in a temporary directory. The node's binary is a
script that logs its calls, and ``supervisorctl`` is a logging stand-in on PATH, since a real
supervisord is what the end-to-end tests run (tests/reset/test_reset_e2e.py).
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from ops_tools.checksums import sha256_file
from ops_tools.reset.cycle import breakdown
from ops_tools.reset.network import STAGED, _reset_command
from ops_tools.reset.nodes import Node


def _script(path: Path, name: str, log: Path) -> None:
    path.write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def host(tmp_path):
    """A node's files as stage-nodes leaves them: the live binary and spec, and the new ones
    beside them."""
    log = tmp_path / "calls.log"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    # supervisorctl: "status" says not running (exit 3), every other action succeeds
    ctl = bindir / "supervisorctl"
    ctl.write_text(f'#!/bin/sh\necho "supervisorctl $3 $4" >> {log}\n'
                   '[ "$3" = status ] && exit 3\nexit 0\n')
    ctl.chmod(0o755)
    binary, spec = tmp_path / "net-node", tmp_path / "raw.json"
    _script(binary, "old-node", log)
    spec.write_text('{"old": true}')
    _script(Path(f"{binary}{STAGED}"), "new-node", log)
    render = tmp_path / "render"
    render.mkdir()
    (render / "raw.json").write_text('{"new": true}')
    Path(f"{spec}{STAGED}").write_text('{"new": true}')
    node = Node("authority-0", "authority", {
        "binary": {"path": str(binary)}, "chainspec_path": str(spec),
        "base_path": str(tmp_path / "base"),
        "service": {"manager": "supervisor", "name": "net-node-authority-0",
                    "supervisor_conf": str(tmp_path / "supervisord.conf")}})
    facts = {"render_dir": str(render), "binary_sha256": sha256_file(Path(f"{binary}{STAGED}"))}
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}

    def run(resume: bool = False) -> subprocess.CompletedProcess[str]:
        ctx = SimpleNamespace(facts=facts, opts=SimpleNamespace(resume=resume))
        return subprocess.run(["sh", "-c", _reset_command(ctx, node)], env=env,
                              capture_output=True, text=True, check=False, timeout=60)

    def calls() -> list[str]:
        return log.read_text().splitlines() if log.exists() else []

    return SimpleNamespace(run=run, calls=calls, binary=binary, spec=spec, facts=facts)


@pytest.mark.process
def test_the_old_chain_is_purged_then_the_new_files_are_put_in_place_and_started(host):
    host.facts["stopped_nodes"] = ["authority-0"]  # stop-nodes stopped it
    proc = host.run()
    assert proc.returncode == 0, proc.stderr
    calls = host.calls()
    # the purge is the old binary's, reading the old spec: the old chain's database goes
    assert calls[0] == f"old-node purge-chain --base-path {host.binary.parent / 'base'}" \
        f" --chain {host.spec} -y"
    assert calls[-1] == "supervisorctl start net-node-authority-0"
    assert host.spec.read_text() == '{"new": true}'
    assert sha256_file(host.binary) == host.facts["binary_sha256"]
    assert not Path(f"{host.binary}{STAGED}").exists()


@pytest.mark.process
def test_a_node_left_running_by_stop_nodes_stops_in_its_reset_command_before_the_purge(host):
    # An authority on a machine of its own: stop-nodes leaves it to this command (one round
    # trip less in the window), which must stop it before anything deletes its database.
    proc = host.run()
    assert proc.returncode == 0, proc.stderr
    calls = host.calls()
    assert calls[0] == "supervisorctl stop net-node-authority-0"
    assert calls[1].startswith("old-node purge-chain")
    assert calls[-1] == "supervisorctl start net-node-authority-0"


def test_stop_nodes_leaves_the_authorities_to_their_reset_command_in_a_live_run_only():
    from ops_tools.reset.network import stop_nodes

    def node(host: str, role: str) -> Node:
        return Node(host, role, {"service": {"manager": "systemd", "name": f"net-node-{host}"}})

    nodes = [node("authority-0", "authority"), node("authority-1", "authority"),
             node("rpc-0", "rpc")]

    def ctx(resume: bool, stopped: list[str]) -> SimpleNamespace:
        calls: list[str] = []
        return SimpleNamespace(
            opts=SimpleNamespace(resume=resume), facts={"stopped_with_services": stopped},
            of_role=lambda *roles: [n for n in nodes if n.role in roles],
            machines=SimpleNamespace(run=lambda what, cmds, parallel=False: calls.append(what)),
            calls=calls)

    live = ctx(False, [])
    assert "authority-0 (with the reset's command)" in stop_nodes(live)
    assert live.calls == ["stop rpc-0"] and live.facts["stopped_nodes"] == ["rpc-0"]
    # a resumed cycle cannot know what still runs: it stops every node, public ones first
    resumed = ctx(True, ["rpc-0"])
    stop_nodes(resumed)
    assert resumed.calls == ["stop rpc-0", "stop authority-0, authority-1"]
    assert resumed.facts["stopped_nodes"] == ["authority-0", "authority-1", "rpc-0"]


@pytest.mark.process
def test_a_file_that_does_not_check_out_is_never_started(host):
    host.facts["binary_sha256"] = "0" * 64
    proc = host.run()
    assert proc.returncode == 3
    assert not any("start" in c for c in host.calls()), host.calls()
    # what the host has is said, so that the error names it
    assert sha256_file(host.binary) in proc.stderr and str(host.binary) in proc.stderr


@pytest.mark.process
def test_a_missing_staged_file_stops_before_anything_starts(host):
    Path(f"{host.spec}{STAGED}").unlink()
    proc = host.run()
    assert proc.returncode != 0
    assert not any("start" in c for c in host.calls()), host.calls()


@pytest.mark.process
def test_a_resumed_cycle_stops_the_node_and_purges_with_the_new_files(host):
    proc = host.run(resume=True)
    assert proc.returncode == 0, proc.stderr
    calls = host.calls()
    # stopped first (never a purge under a running node), then the new binary purges
    assert calls[0] == "supervisorctl stop net-node-authority-0"
    assert calls[1].startswith("new-node purge-chain")
    assert calls[-1] == "supervisorctl start net-node-authority-0"


def test_the_breakdown_files_each_step_under_its_phase_inside_the_window():
    lo, hi = 100.0, 110.0
    phases = [("preflight", 90.0, 95.0), ("stop-services", 100.0, 100.5),
              ("stop-nodes", 100.6, 103.0), ("wait-finality", 103.1, 106.0),
              ("verify", 106.2, 110.0), ("record", 111.0, 120.0)]
    timings = [["preflight", "disk", 91.0, 1.0],
               ["stop-nodes", "stop authority-0", 100.6, 2.3],
               ["wait-finality", "wait for authority-0", 103.1, 2.8],
               ["verify", "wait for rpc-0", 106.2, 3.7]]
    out = breakdown(lo, hi, phases, timings)
    assert [p["phase"] for p in out] == ["stop-services", "stop-nodes", "wait-finality",
                                         "verify", "(between phases)"]
    assert out[1] == {"phase": "stop-nodes", "seconds": 2.4,
                      "steps": [{"step": "stop authority-0", "seconds": 2.3}]}
    assert sum(p["seconds"] for p in out) == pytest.approx(hi - lo)
    assert out[-1]["seconds"] == pytest.approx(0.4)


def _restart_ctx(machines: dict[str, str]):
    def node(host: str, role: str) -> Node:
        return Node(host, role, {"service": {"manager": "systemd", "name": f"net-node-{host}"}})

    nodes = [node("authority-0", "authority"), node("authority-1", "authority"),
             node("rpc-0", "rpc")]
    pending = {"name": "net-faucet", "manager": "systemd", "supervisor_conf": "",
               "reload": False, "manifest": "/var/lib/net/faucet/service.json",
               "pending": "/var/lib/net/faucet/service.json.pending"}
    calls: list[tuple[str, dict[str, list[str]]]] = []
    later: list[tuple[str, dict[str, list[str]]]] = []

    def run_later(what: str, cmds: dict[str, list[str]], parallel: bool = False) -> str:
        later.append((what, cmds))
        return "the restarts' future"

    return SimpleNamespace(
        inventory=SimpleNamespace(hosts=lambda group=None: ["faucet-0"]),
        facts={"pending_services": {"faucet-0": [pending]}},
        of_role=lambda *roles: [n for n in nodes if n.role in roles],
        machines=SimpleNamespace(
            machine_of=machines, run_later=run_later,
            run=lambda what, cmds, parallel=False: calls.append((what, cmds))),
        background=SimpleNamespace(restarts=None),
        calls=calls, later=later,
    )


def test_authorities_stop_with_the_services_where_the_rpc_node_is_on_their_machine():
    from ops_tools.reset.converge import restart_command, restart_services
    from ops_tools.reset.shell import all_at_once, in_order

    one = dict.fromkeys(("authority-0", "authority-1", "rpc-0", "faucet-0"), "@local")
    stops = {"rpc-0": [in_order([all_at_once(["systemctl stop net-node-rpc-0.service"]),
                                 all_at_once(["systemctl stop net-node-authority-0.service",
                                              "systemctl stop net-node-authority-1.service"])])]}
    ctx = _restart_ctx(one)
    restart_services(ctx)
    # one command: the RPC node stops first, then the authorities; the faucet's restart goes
    # apart (a child process of the cycle) and the services phase awaits it
    (_, commands), = ctx.calls
    assert commands == stops
    assert ctx.facts["stopped_with_services"] == ["rpc-0", "authority-0", "authority-1"]
    (_, restarts), = ctx.later
    assert restarts == {"faucet-0": [restart_command(ctx.facts["pending_services"]["faucet-0"][0])]}
    assert ctx.background.restarts == "the restarts' future"


def test_authorities_on_other_machines_are_left_to_stop_nodes():
    from ops_tools.reset.converge import restart_command, restart_services

    ctx = _restart_ctx({"authority-0": "a0:22", "authority-1": "a1:22", "rpc-0": "rpc0:22",
                        "faucet-0": "svc:22"})
    restart_services(ctx)
    (_, commands), = ctx.calls
    assert commands == {"rpc-0": ["systemctl stop net-node-rpc-0.service"]}
    assert ctx.facts["stopped_with_services"] == ["rpc-0"]
    # the remote faucet's restart is sent on its own and awaited by the services phase: its
    # start-up does not hold the window, which waits for the RPC node's stop alone
    (_, restarts), = ctx.later
    assert restarts == {"faucet-0": [restart_command(ctx.facts["pending_services"]["faucet-0"][0])]}
    assert ctx.background.restarts == "the restarts' future"


@pytest.mark.process
def test_combined_commands_run_every_step_and_fail_when_one_fails():
    from ops_tools.reset.shell import all_at_once, in_order

    def sh(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["sh", "-c", command], capture_output=True, text=True,
                              check=False, timeout=30)

    # a batch of batches, as restart-services sends: the second step runs after the first
    ok = sh(all_at_once([in_order([all_at_once(["echo rpc"]),
                                   all_at_once(["echo a0", "echo a1"])]), "echo faucet"]))
    assert ok.returncode == 0 and sorted(ok.stdout.split()) == ["a0", "a1", "faucet", "rpc"]
    failed = sh(in_order([all_at_once(["echo one", "false"]), "echo never"]))
    assert failed.returncode != 0 and failed.stdout.split() == ["one"]
    assert sh(all_at_once(["true", "exit 4"])).returncode != 0


def test_a_phase_a_killed_run_left_ends_where_the_resumed_run_began():
    phases = [("stop-nodes", 100.0, 101.0), ("reset-authorities", 101.0, None),
              ("build", 150.0, 151.0), ("reset-authorities", 160.0, 161.0),
              ("verify", 161.0, 170.0)]
    timings = [["reset-authorities", "purge, put in place, check, start", 160.0, 0.9]]
    out = breakdown(100.0, 170.0, phases, timings)
    killed, resumed = (p for p in out if p["phase"] == "reset-authorities")
    assert killed == {"phase": "reset-authorities", "seconds": 49.0, "steps": []}
    assert resumed["steps"] == [{"step": "purge, put in place, check, start", "seconds": 0.9}]


def test_waits_run_at_once_each_to_its_end_and_the_first_failure_is_raised(tmp_path):
    import threading

    from ops_tools.reset.context import CycleContext, CycleFailed

    ctx = CycleContext(opts=None, inventory=None, dir=tmp_path)  # type: ignore[arg-type]
    # Each wait passes only once the other has started: they must run at the same time.
    both = threading.Barrier(2, timeout=60)

    def meets(name: str) -> str:
        both.wait()
        return name

    assert ctx.wait_on_hosts([lambda: meets("authority-0"), lambda: meets("authority-1")]) == [
        "authority-0", "authority-1"]
    finished: list[str] = []

    def fails() -> str:
        raise CycleFailed("authority-1 did not author blocks")

    def other() -> str:
        finished.append("rpc-0")
        return "rpc-0"

    with pytest.raises(CycleFailed, match="authority-1 did not author"):
        ctx.wait_on_hosts([fails, other])
    assert finished == ["rpc-0"]  # the other wait ran to its end


@pytest.fixture
def node_rpc():
    """A JSON-RPC server on loopback answering as a node that authors a block per call for its
    head and has finalized block 1."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    head = {"n": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            method, params = body["method"], body["params"]
            if method == "chain_getBlockHash":
                result: object = "0xgenesis"
            elif method == "chain_getFinalizedHead":
                result = "0xfinal"
            elif params == ["0xfinal"]:
                result = {"number": hex(1)}
            else:
                head["n"] += 1
                result = {"number": hex(head["n"])}
            data = json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


@pytest.mark.process
def test_the_wait_on_a_host_polls_its_node_until_it_meets_the_condition(node_rpc):
    import json

    from ops_tools.reset.hostops import _WAIT_CLIENT

    def wait(genesis: str, best: int, finalized: int, timeout: float) -> list[object]:
        out = subprocess.run(["python3", "-c", _WAIT_CLIENT, node_rpc, genesis, str(best),
                              str(finalized), str(timeout), "0.01"],
                             capture_output=True, text=True, check=True, timeout=60)
        return json.loads(out.stdout)

    # it polls again until the head reaches #5, then answers once
    met, genesis, best, finalized = wait("0xgenesis", 5, 1, 30)
    assert (met, genesis, finalized) == (True, "0xgenesis", 1) and best >= 5
    # another genesis is never met: it gives up at its time-out with what it saw last
    assert wait("0xother", 0, -1, 0.3)[:2] == [False, "0xgenesis"]
    # finalized #2 is never reached here (-1 would not ask for finality at all)
    assert wait("0xgenesis", 0, 2, 0.3)[0] is False
    assert wait("0xgenesis", 0, -1, 30)[0] is True


@pytest.mark.process
def test_this_machines_later_commands_run_as_child_processes_beside_the_main_batch(tmp_path):
    """pyinfra's local connector runs its processes in the main thread; the restarts sent
    apart run as child processes, while the main thread runs its own batch over pyinfra."""
    from ops_tools.deploy.inventory import Inventory
    from ops_tools.reset.hostops import Machines
    from ops_tools.reset.nodes import HostOpFailed

    local = {"ansible_connection": "local"}
    inventory = Inventory(tmp_path / "hosts.yml", {"services": ["faucet-0", "gateway-0"]},
                          {"faucet-0": local, "gateway-0": local, "rpc-0": local})
    gate = tmp_path / "gate"
    with Machines(inventory, ["faucet-0", "gateway-0", "rpc-0"]) as machines:
        # waits until the main batch below has run: only a child process of its own can
        later = machines.run_later("restart", {
            "faucet-0": [f"while [ ! -e {gate} ]; do sleep 0.05; done; echo restarted"],
            "gateway-0": ["echo also"]}, parallel=True)
        machines.run("stop rpc-0", {"rpc-0": [f"touch {gate}"]})
        outputs, (what, _started, seconds) = later.result(timeout=60)
        assert sorted(outputs["@local"].split()) == ["also", "restarted"]
        assert what == "restart" and seconds >= 0
        failed = machines.run_later("restart", {"faucet-0": ["echo no >&2; exit 3"]})
        with pytest.raises(HostOpFailed, match="restart failed on @local: no"):
            failed.result(timeout=60)

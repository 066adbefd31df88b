"""The pure parts of the reset cycle: decision, journal, lock, service hooks."""

from __future__ import annotations

import json
import multiprocessing as mp

import pytest

from ops_tools.errors import InputError
from ops_tools.reset.decide import Action, Observed, decide
from ops_tools.reset.hooks import load_hooks
from ops_tools.reset.journal import Journal
from ops_tools.reset.lock import LockHeld, cycle_lock
from ops_tools.reset.nodes import LOCAL, Node, machine_of
from ops_tools.reset.phases import DESTRUCTIVE, INSPECT, REPAIR, RESET, Phase
from ops_tools.reset.recheck import CHECKS, KEPT, RERUN

G_OLD, G_NEW = "0x" + "11" * 32, "0x" + "22" * 32


def observed(**kw):
    base = dict(
        expected_genesis=G_NEW,
        expected_binary_sha256="b1",
        public_genesis=G_NEW,
        node_genesis={"a0": G_NEW, "a1": G_NEW, "rpc": G_NEW},
        deployed_genesis={"a0": G_NEW, "a1": G_NEW, "rpc": G_NEW},
        deployed_binary_sha256={"a0": "b1", "a1": "b1", "rpc": "b1"},
    )
    base.update(kw)
    return Observed(**base)


def test_same_genesis_and_binary_is_nothing_to_do():
    d = decide(observed())
    assert d.action is Action.NOTHING
    assert G_NEW in d.reason


OLD_EVERYWHERE = {"a0": G_OLD, "a1": G_OLD, "rpc": G_OLD}


def test_new_genesis_is_a_reset_and_says_both_hashes():
    d = decide(observed(public_genesis=G_OLD, node_genesis=OLD_EVERYWHERE,
                        deployed_genesis=OLD_EVERYWHERE))
    assert d.action is Action.RESET
    assert G_OLD in d.reason and G_NEW in d.reason


def test_a_node_behind_the_public_endpoint_is_a_reset():
    d = decide(observed(node_genesis={"a0": G_NEW, "a1": G_OLD, "rpc": G_NEW}))
    assert d.action is Action.RESET and "a1 serves" in d.reason


def test_a_down_network_that_has_deployed_another_genesis_is_a_reset():
    # Nothing answers, but the manifests record the old chain: the new revision differs.
    d = decide(observed(public_genesis=None, node_genesis=dict.fromkeys(OLD_EVERYWHERE),
                        deployed_genesis=OLD_EVERYWHERE))
    assert d.action is Action.RESET and "a0 has deployed" in d.reason


def test_a_down_public_endpoint_in_front_of_the_expected_genesis_is_a_repair():
    d = decide(observed(public_genesis=None, node_genesis={"a0": G_NEW, "a1": G_NEW,
                                                           "rpc": None}))
    assert d.action is Action.REPAIR
    assert d.down == ["rpc", "public endpoint"]


def test_every_node_down_on_the_expected_deployed_genesis_is_a_repair():
    d = decide(observed(public_genesis=None, node_genesis=dict.fromkeys(OLD_EVERYWHERE)))
    assert d.action is Action.REPAIR and d.down == ["a0", "a1", "rpc", "public endpoint"]


def test_a_stopped_authority_behind_a_healthy_endpoint_is_a_repair():
    d = decide(observed(node_genesis={"a0": G_NEW, "a1": None, "rpc": G_NEW}))
    assert d.action is Action.REPAIR and d.down == ["a1"]


def test_force_reset_wipes_an_unchanged_genesis_and_says_so():
    d = decide(observed(force_reset=True))
    assert d.action is Action.RESET and "--force-reset" in d.reason
    assert decide(observed()).action is Action.NOTHING


def test_changed_binary_alone_is_a_rolling_restart():
    d = decide(observed(deployed_binary_sha256={"a0": "b0", "a1": "b1", "rpc": "b1"}))
    assert d.action is Action.ROLL_BINARY and "a0" in d.reason


def test_inspection_is_never_destructive_and_the_reset_order_is_safe():
    assert not DESTRUCTIVE & set(INSPECT)
    assert Phase.PREFLIGHT not in DESTRUCTIVE
    order = [p for p in RESET]
    assert (
        order.index(Phase.PREFLIGHT)
        < order.index(Phase.STOP_SERVICES)
        < order.index(Phase.STOP_NODES)
    )
    # the RPC node and the services are wiped only once the authorities finalize again
    assert order.index(Phase.WAIT_FINALITY) < order.index(Phase.RESET_RPC)
    assert order.index(Phase.VERIFY) < order.index(Phase.SERVICES)
    # a repair purges nothing: no phase of it stops or resets a node
    assert not set(REPAIR) & {Phase.STOP_NODES, Phase.RESET_AUTHORITIES, Phase.RESET_RPC}


def test_every_phase_has_exactly_one_resume_rule():
    rules = [set(CHECKS), set(KEPT), set(RERUN)]
    for phase in Phase:
        assert sum(phase in r for r in rules) == 1, phase


def test_journal_round_trip_and_resume_point(tmp_path):
    j = Journal.new(tmp_path / "journal.json", "c1", "inv", "repo", "main")
    r = j.begin("build")
    j.finish(r, "abc")
    r = j.begin("render")
    j.fail(r, "boom")
    loaded = Journal.load(tmp_path / "journal.json")
    assert loaded.cycle_id == j.cycle_id == "c1"
    assert loaded.done("build") and not loaded.done("render")
    assert loaded.status == "failed" and loaded.error == "render: boom"
    assert (tmp_path / "journal.json").stat().st_mode & 0o777 == 0o600


def test_a_phase_killed_while_running_is_marked_interrupted_on_resume(tmp_path):
    j = Journal.new(tmp_path / "journal.json", "c1", "inv", "repo", "main")
    j.finish(j.begin("stop-nodes"))
    j.begin("reset-authorities")  # then SIGKILL: nothing records its end
    loaded = Journal.load(tmp_path / "journal.json")
    loaded.resume()
    again = Journal.load(tmp_path / "journal.json")
    assert [(p.name, p.status) for p in again.steps] == [
        ("stop-nodes", "done"), ("reset-authorities", "interrupted")]
    assert not again.done("reset-authorities")


def test_missing_journal_is_a_clear_error(tmp_path):
    with pytest.raises(InputError, match="no reset cycle to resume"):
        Journal.load(tmp_path / "journal.json")


def _hold(path, ready, release):
    with cycle_lock(path, "holder-cycle"):
        ready.set()
        release.wait(30)


@pytest.mark.process
def test_second_cycle_is_refused_and_names_the_holder(tmp_path):
    ctx = mp.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(tmp_path / "lock", ready, release))
    holder.start()
    try:
        assert ready.wait(30)
        with pytest.raises(LockHeld) as err, cycle_lock(tmp_path / "lock", "second"):
            pass
        assert f"pid {holder.pid}" in str(err.value) and "holder-cycle" in str(err.value)
    finally:
        release.set()
        holder.join(30)
    with cycle_lock(tmp_path / "lock", "third"):  # released when the holder ended
        assert json.loads((tmp_path / "lock").read_text())["cycle_id"] == "third"


def test_service_hooks_declare_what_a_reset_does():
    hooks = load_hooks(
        [
            {
                "name": "indexer",
                "host": "svc",
                "reset": "wipe",
                "stop": "stop-i",
                "start": "start-i",
                "wipe": "rm -rf db",
            },
            {
                "name": "gateway",
                "host": "svc",
                "reset": "restart",
                "stop": "stop-g",
                "start": "start-g",
            },
        ],
        {"svc"},
    )
    assert hooks[0].after_reset() == ["rm -rf db", "start-i"]
    assert hooks[1].after_reset() == ["start-g"]
    # A service that names its program is stopped and started through its service manager.
    (named,) = load_hooks([{"name": "faucet", "host": "svc", "reset": "restart",
                            "program": {"manager": "systemd", "name": "net-faucet"}}], {"svc"})
    assert (named.stop, named.start) == ("systemctl stop net-faucet.service",
                                         "systemctl start net-faucet.service")
    with pytest.raises(InputError, match="give 'program' or the 'stop' command"):
        load_hooks([{"name": "x", "host": "svc", "reset": "restart"}], {"svc"})
    with pytest.raises(InputError, match=r"net_services\[0\].reset"):
        load_hooks(
            [{"name": "x", "host": "svc", "reset": "explode", "stop": "a", "start": "b"}], {"svc"}
        )
    with pytest.raises(InputError, match="no 'reseed' command"):
        load_hooks(
            [{"name": "x", "host": "svc", "reset": "reseed", "stop": "a", "start": "b"}], {"svc"}
        )
    with pytest.raises(InputError, match="not a host"):
        load_hooks(
            [{"name": "x", "host": "nope", "reset": "restart", "stop": "a", "start": "b"}], {"svc"}
        )


def test_pyinfra_reaches_a_host_as_ansible_does():
    name, data = machine_of({
        "ansible_host": "10.0.0.5", "ansible_port": 2222, "ansible_user": "deploy",
        "ansible_become": True, "ansible_ssh_private_key_file": "/keys/id",
        "ansible_ssh_common_args": "-o UserKnownHostsFile=/keys/known_hosts -o IdentitiesOnly=yes",
    }, "authority-0")
    assert name == "10.0.0.5:2222"
    assert data["ssh_user"] == "deploy" and data["ssh_key"] == "/keys/id"
    assert data["_sudo"] is True
    # ansible.cfg: host_key_checking = true. An unknown key is refused, never added.
    assert data["ssh_strict_host_key_checking"] == "yes"
    assert data["ssh_known_hosts_file"] == "/keys/known_hosts"


def test_pyinfra_host_key_checking_follows_the_inventorys_ssh_settings():
    _, plain = machine_of({"ansible_host": "h"}, "h")
    assert plain["ssh_strict_host_key_checking"] == "yes"
    assert "_sudo" not in plain and "ssh_known_hosts_file" not in plain
    _, off = machine_of({"ansible_host": "h", "ansible_host_key_checking": False}, "h")
    assert off["ssh_strict_host_key_checking"] == "no"
    _, explicit = machine_of({"ansible_host": "h",
                              "ansible_ssh_extra_args": "-oStrictHostKeyChecking=accept-new"}, "h")
    assert explicit["ssh_strict_host_key_checking"] == "accept-new"
    _, other_user = machine_of({"ansible_host": "h", "ansible_become": "yes",
                                "ansible_become_user": "net"}, "h")
    assert other_user["_sudo"] is True and other_user["_sudo_user"] == "net"
    assert machine_of({"ansible_connection": "local"}, "h") == (LOCAL, {})


def test_every_staged_service_of_a_host_is_restarted():
    # One inventory host may deploy several services (indexer-0: the processor and the API);
    # each staged restart is kept, and all of them run at once on the machine.
    from types import SimpleNamespace

    from ops_tools.reset.converge import restart_command, restart_services

    def pending(name):
        return {"name": name, "manager": "systemd", "supervisor_conf": "", "reload": False,
                "manifest": f"/var/lib/net/{name}/service.json",
                "pending": f"/var/lib/net/{name}/service.json.pending"}

    staged = {"indexer-0": [pending("net-indexer-processor"), pending("net-indexer")],
              "faucet-0": [pending("net-faucet")]}
    rpc = Node("rpc-0", "rpc", {"service": {"manager": "systemd", "name": "net-node"}})
    calls, later = [], []
    ctx = SimpleNamespace(
        inventory=SimpleNamespace(hosts=lambda group=None: list(staged)),
        facts={"pending_services": staged},
        of_role=lambda *roles: [rpc] if "rpc" in roles else [],
        machines=SimpleNamespace(
            machine_of=dict.fromkeys(["rpc-0", *staged], "@local"),
            run=lambda what, cmds, parallel=False: calls.append((cmds, parallel)),
            run_later=lambda what, cmds, parallel=False: later.append((cmds, parallel))),
        background=SimpleNamespace(restarts=None),
    )
    detail = restart_services(ctx)
    # All at once, sent apart from the RPC node's stop, which is all the phase waits for.
    assert later == [({h: [restart_command(p) for p in ps] for h, ps in staged.items()}, True)]
    assert calls == [({"rpc-0": ["systemctl stop net-node.service"]}, True)]
    assert detail == ("restarted net-faucet, net-indexer, net-indexer-processor (awaited by the"
                      " services phase); stopped rpc-0 with them")
    assert ctx.facts["stopped_with_services"] == ["rpc-0"]


def test_a_resumed_cycle_skips_the_build_only_while_its_artifact_is_intact(tmp_path):
    from types import SimpleNamespace

    from ops_tools.checksums import sha256_file
    from ops_tools.reset.recheck import recheck

    binary, runtime = tmp_path / "net-node", tmp_path / "runtime.wasm"
    binary.write_bytes(b"node")
    runtime.write_bytes(b"wasm")
    ctx = SimpleNamespace(facts={
        "revision": "ab" * 20, "node_binary": str(binary), "runtime": str(runtime),
        "binary_sha256": sha256_file(binary), "runtime_sha256": sha256_file(runtime)})
    assert recheck(Phase.BUILD, ctx) == (True, f"checked: artifact of {'ab' * 6} intact")
    runtime.write_bytes(b"another runtime")
    holds, why = recheck(Phase.BUILD, ctx)
    assert not holds and why == f"the built runtime {runtime} no longer has sha256" \
        f" {ctx.facts['runtime_sha256']}"
    binary.unlink()
    assert recheck(Phase.BUILD, ctx) == (False, f"the built node binary {binary} is gone")
    # the decision is the attempt being resumed: kept, never taken again mid-reset
    assert recheck(Phase.DECIDE, ctx)[0]


OLD, NEW = "0x" + "01" * 32, "0x" + "02" * 32


def _world(tmp_path):
    """The hosts as a resumed cycle finds them after a reset's phases (a stand-in for the hosts'
    answers: the end-to-end tests cover the same rules on the local network)."""
    from types import SimpleNamespace

    from ops_tools.checksums import sha256_file

    render = tmp_path / "render"
    render.mkdir()
    (render / "raw.json").write_text("{}")
    nodes = [Node(h, role, {"binary": {"path": f"/opt/{h}/net-node"},
                            "chainspec_path": f"/opt/{h}/raw.json"})
             for h, role in (("authority-0", "authority"), ("rpc-0", "rpc"))]
    files = {}
    for n in nodes:  # (host, path) -> sha256: what was pushed
        files[(n.host, n.manifest["binary"]["path"])] = "b" * 64
        files[(n.host, n.manifest["chainspec_path"])] = sha256_file(render / "raw.json")
    world = SimpleNamespace(served={n.host: NEW for n in nodes}, files=files,
                            manifests={n.host: {"genesis_hash": NEW} for n in nodes})
    ctx = SimpleNamespace(
        facts={"expected_genesis": NEW, "render_dir": str(render), "binary_sha256": "b" * 64},
        nodes=nodes,
        of_role=lambda *roles: [n for n in nodes if n.role in roles],
        node_rpc=lambda n, method, params=None: world.served.get(n.host),
        machines=SimpleNamespace(sha256=lambda host, path: world.files.get((host, path))),
        read_manifest=lambda host: world.manifests.get(host),
    )
    return world, ctx


BREAK = {  # the thing each journaled phase claims, removed
    Phase.STOP_NODES: lambda w: w.served.update({"rpc-0": OLD}),
    Phase.RESET_AUTHORITIES: lambda w: w.files.pop(("authority-0", "/opt/authority-0/raw.json")),
    Phase.RESET_RPC: lambda w: w.files.pop(("rpc-0", "/opt/rpc-0/net-node")),
    Phase.START_AUTHORITIES: lambda w: w.served.update({"authority-0": None}),
    Phase.START_RPC: lambda w: w.served.update({"rpc-0": None}),
    Phase.RECORD: lambda w: w.manifests.update({"rpc-0": {"genesis_hash": OLD}}),
}


def test_every_checked_phase_is_covered_by_a_break_below():
    from ops_tools.reset.recheck import CHECKS

    assert set(CHECKS) == set(BREAK) | {Phase.BUILD}  # BUILD: the test above


@pytest.mark.parametrize("phase", list(BREAK), ids=lambda p: p.value)
def test_a_resumed_cycle_redoes_a_phase_whose_result_is_gone(tmp_path, phase):
    from ops_tools import runbook
    from ops_tools.reset.recheck import recheck

    world, ctx = _world(tmp_path)
    j = Journal.new(tmp_path / "journal.json", "c1", "inv", "repo", "main")
    j.finish(j.begin(phase.value), "done by the killed cycle")
    runs: list[str] = []
    step = runbook.Step(phase.value, lambda: runs.append("run") or "ran",
                        lambda: recheck(phase, ctx))
    assert runbook.settle(j, step).outcome == "kept" and runs == []
    BREAK[phase](world)
    settled = runbook.settle(j, step)
    assert settled.outcome == "redone" and runs == ["run"], settled
    assert j.record(phase.value).detail.startswith(f"done again ({settled.why})")

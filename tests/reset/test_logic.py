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
from ops_tools.reset.nodes import LOCAL, machine_of
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
    loaded.mark_interrupted()
    again = Journal.load(tmp_path / "journal.json")
    assert [(p.name, p.status) for p in again.phases] == [
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
    calls = []
    ctx = SimpleNamespace(
        inventory=SimpleNamespace(hosts=lambda group=None: list(staged)),
        facts={"pending_services": staged},
        machines=SimpleNamespace(run=lambda what, cmds, parallel=False: calls.append(
            (cmds, parallel))),
    )
    detail = restart_services(ctx)
    assert calls == [({h: [restart_command(p) for p in ps] for h, ps in staged.items()}, True)]
    assert detail == "restarted net-faucet, net-indexer, net-indexer-processor"


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

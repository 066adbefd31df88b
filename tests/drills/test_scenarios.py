"""The scenarios as pure descriptions: what each injects, which alert it expects, and the
registry's errors (no processes)."""

from __future__ import annotations

import pytest

from ops_tools.drills import faults
from ops_tools.drills.scenarios import (
    FINALITY,
    READY,
    RESOLVED,
    SCENARIOS,
    AlertCheck,
    Entry,
    Scenario,
    Topology,
    build,
)
from ops_tools.errors import InputError

TOPO = Topology(authorities=("authority-0", "authority-1"), rpc_nodes=("rpc-0",),
                services={"faucet-0": "faucet", "gateway-0": "gateway"})


def test_authority_down_stops_the_last_authority_and_expects_finality_stalled():
    s = build("authority-down", None, TOPO)
    assert s.fault == faults.StopPrograms(("authority-1",))
    assert s.alert == AlertCheck("FinalityStalled")
    assert s.recovery == (FINALITY, READY, RESOLVED)
    assert build("authority-down", "authority-0", TOPO).fault.hosts() == ("authority-0",)


def test_rpc_down_expects_the_public_rpc_probe():
    s = build("rpc-down", None, TOPO)
    assert s.fault.hosts() == ("rpc-0",)
    assert s.alert == AlertCheck("PublicEndpointDown", {"job": "public_rpc"})


@pytest.mark.parametrize("name", ["faucet", "faucet-0"])
def test_service_down_takes_a_service_or_its_host(name):
    s = build("service-down", name, TOPO)
    assert s.fault.hosts() == ("faucet-0",)
    assert s.alert == AlertCheck("ServiceNotReady", {"host": "faucet-0"})
    assert s.title == f"service-down {name}"


def test_partition_cuts_the_last_authority_off_from_every_other_node():
    s = build("partition", None, TOPO)
    assert s.fault == faults.Partition("authority-1", ("authority-0", "rpc-0"))
    assert s.alert.name == "FinalityStalled"
    assert s.to_json()["fault"] == {"kind": "partition", "cut": "authority-1",
                                    "from": ["authority-0", "rpc-0"]}


def test_faucet_drain_finds_the_faucet_and_restores_before_it_asks_for_finality():
    s = build("faucet-drain", None, TOPO)
    assert s.fault == faults.FaucetDrain("faucet-0")
    assert s.alert == AlertCheck("FaucetFewDripsLeft", {"host": "faucet-0"})
    assert s.recovery[0] == RESOLVED


@pytest.mark.parametrize(("name", "arg", "words"), [
    ("nope", None, ["'nope' is unknown", "authority-down"]),
    ("service-down", None, ["needs the service"]),
    ("service-down", "mailer", ["'mailer' is not a service", "faucet-0", "gateway"]),
    ("authority-down", "rpc-0", ["'rpc-0' is not in the inventory", "authority-0"]),
    ("rpc-down", "authority-0", ["'authority-0' is not in the inventory"]),
])
def test_bad_names_are_refused_with_what_to_name(name, arg, words):
    with pytest.raises(InputError) as err:
        build(name, arg, TOPO)
    for word in words:
        assert word in str(err.value)


def test_partition_needs_two_authorities():
    with pytest.raises(InputError, match="two authorities"):
        build("partition", None, Topology(("authority-0",), ("rpc-0",)))


def test_a_service_name_shared_by_two_hosts_must_be_named_by_host():
    topo = Topology(("a-0",), (), {"faucet-0": "faucet", "faucet-1": "faucet"})
    with pytest.raises(InputError, match="names several hosts"):
        build("service-down", "faucet", topo)
    assert build("service-down", "faucet-1", topo).fault.hosts() == ("faucet-1",)


def test_a_scenario_is_added_by_one_entry(monkeypatch):
    class Wipe:  # a fault from another room: only the Fault methods
        def describe(self): return {"kind": "wipe"}
        def hosts(self): return ("authority-0",)
        def inject(self, env): return {}
        def remove(self, env, facts): return ""
        def present(self, env, facts): return False, ""

    entry = Entry("wipe a key", lambda topo, arg: Scenario(
        "key-loss", arg, "wipe", Wipe(), AlertCheck("FinalityStalled")))
    monkeypatch.setitem(SCENARIOS, "key-loss", entry)
    s = build("key-loss", None, TOPO)
    assert isinstance(s.fault, faults.Fault)
    assert s.to_json()["fault"] == {"kind": "wipe"}


def test_every_registered_scenario_builds_and_describes_itself():
    for name, entry in SCENARIOS.items():
        s = build(name, "faucet" if entry.arg == "service" else None, TOPO)
        assert s.name == name and isinstance(s.fault, faults.Fault)
        assert s.to_json()["alert"]["alertname"]


def test_key_loss_asks_for_its_backup_before_touching_anything(capsys):
    from ops_tools.cli.main import main

    with pytest.raises(SystemExit) as exit_:
        main(["drill", "key-loss", "--inventory", "inventories/local"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--backup-dir" in err and "--passphrase-file" in err


def test_partition_on_hosts_with_namespaces_is_a_firewall_cut():
    remote = Topology(authorities=("authority-0", "authority-1"),
                      rpc_nodes=("rpc-0", "services-node-0"), firewall=True)
    s = build("partition", None, remote)
    assert s.fault == faults.FirewallPartition("authority-1",
                                               ("authority-0", "rpc-0", "services-node-0"))
    assert s.fault.describe()["by"] == "nftables"
    assert s.alert == AlertCheck("FinalityStalled")
    # The local network keeps the nodes' own peer handling.
    assert isinstance(build("partition", None, TOPO).fault, faults.Partition)


def test_without_monitoring_only_the_drills_seen_on_the_chain_run(tmp_path):
    from types import SimpleNamespace

    from ops_tools.drills.runner import require

    # What require reads of a network: whether it is monitored, and its inventory's path.
    bare = SimpleNamespace(monitored=False, inventory=SimpleNamespace(path=tmp_path / "testnet"))
    require(bare, build("partition", None, TOPO))  # FinalityStalled: seen on the chain itself
    require(bare, build("authority-down", None, TOPO))
    with pytest.raises(InputError, match=r"waits for ServiceNotReady in Alertmanager, and"
                       r" inventory .* has no monitoring host"):
        require(bare, build("service-down", "faucet", TOPO))
    require(SimpleNamespace(monitored=True, inventory=bare.inventory),
            build("service-down", "faucet", TOPO))

"""The drills' scenarios: each a pure description of the fault it injects, the alert that must
fire, and what recovery means; built from the network's topology (no I/O here).

A scenario is added with one entry in ``SCENARIOS``: its name, a line of help, whether it takes
an argument, and a ``build`` from the topology (and that argument) to a ``Scenario``. Its fault
is any object with the ``faults.Fault`` methods, so a scenario whose fault lives in another
room (a key loss restored from a backup) brings its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ops_tools.drills import faults
from ops_tools.errors import InputError

# What recovery is asserted after the fault is removed (in this order).
FINALITY = "finality"  # the public node's finalized height advances again
READY = "ready"  # every program the fault touched runs, and a service answers /ready
RESOLVED = "resolved"  # the alert that fired resolves in Alertmanager


@dataclass(frozen=True)
class Topology:
    """What a scenario needs to know of the network: its hosts by kind (pure data)."""

    authorities: tuple[str, ...]
    rpc_nodes: tuple[str, ...]
    # service inventory host -> service name (faucet-0 -> faucet)
    services: Mapping[str, str] = field(default_factory=dict)
    # Hosts with network namespaces of their own (remote machines): a partition is firewall
    # rules there; on the local network, the nodes' own peer handling.
    firewall: bool = False

    def service_host(self, name: str) -> str:
        """The host of a service given by host (faucet-0) or by service name (faucet)."""
        if name in self.services:
            return name
        hosts = [h for h, svc in self.services.items() if svc == name]
        if len(hosts) == 1:
            return hosts[0]
        known = ", ".join(sorted(set(self.services) | set(self.services.values()))) or "none"
        what = "names several hosts" if hosts else "is not a service of this network"
        raise InputError(f"service {name!r} {what}; name one of: {known}")


@dataclass(frozen=True)
class AlertCheck:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"alertname": self.name, "labels": dict(self.labels)}


@dataclass(frozen=True)
class Scenario:
    name: str
    arg: str | None
    summary: str
    fault: faults.Fault
    alert: AlertCheck
    recovery: tuple[str, ...] = (FINALITY, READY, RESOLVED)

    @property
    def title(self) -> str:
        return f"{self.name} {self.arg}" if self.arg else self.name

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "arg": self.arg, "summary": self.summary,
                "fault": self.fault.describe(), "alert": self.alert.to_json(),
                "recovery": list(self.recovery)}


@dataclass(frozen=True)
class Entry:
    help: str
    build: Callable[[Topology, str | None], Scenario]
    arg: str = ""  # the argument's name; empty: the scenario takes none


def _authority_down(topo: Topology, arg: str | None) -> Scenario:
    # The last authority: authority-0 is the bootnode the others dial (a stop of it also tests
    # the redial, but authority-1 is what the issue names).
    host = _one_of("authority", topo.authorities, arg)
    return Scenario("authority-down", arg, f"stop {host}: GRANDPA needs both authorities",
                    faults.StopPrograms((host,)), AlertCheck("FinalityStalled"))


def _rpc_down(topo: Topology, arg: str | None) -> Scenario:
    host = _one_of("RPC node", topo.rpc_nodes, arg, last=False)
    return Scenario("rpc-down", arg, f"stop {host}, the node behind the public endpoint",
                    faults.StopPrograms((host,)),
                    AlertCheck("PublicEndpointDown", {"job": "public_rpc"}))


def _service_down(topo: Topology, arg: str | None) -> Scenario:
    if not arg:
        raise InputError("service-down needs the service's name (faucet) or host (faucet-0)")
    host = topo.service_host(arg)
    return Scenario("service-down", arg, f"stop {host} ({topo.services[host]})",
                    faults.StopPrograms((host,)),
                    AlertCheck("ServiceNotReady", {"host": host}),
                    (READY, RESOLVED, FINALITY))


def _partition(topo: Topology, arg: str | None) -> Scenario:
    if len(topo.authorities) < 2:
        raise InputError(f"partition needs two authorities; this network has"
                         f" {list(topo.authorities)}")
    cut = _one_of("authority", topo.authorities, arg)
    others = tuple(h for h in topo.authorities + topo.rpc_nodes if h != cut)
    fault: faults.Fault = (faults.FirewallPartition(cut, others) if topo.firewall
                           else faults.Partition(cut, others))
    how = " (nftables rules in the hosts' network namespaces)" if topo.firewall else ""
    return Scenario("partition", arg,
                    f"{cut} cut off from {', '.join(others)}{how}: the authorities cannot reach"
                    " each other, directly or through a node that would relay their votes",
                    fault, AlertCheck("FinalityStalled"))


def _faucet_drain(topo: Topology, arg: str | None) -> Scenario:
    host = topo.service_host(arg or "faucet")
    return Scenario("faucet-drain", arg,
                    f"move {host}'s balance to a drill account, leaving fewer drips than the"
                    " alert's threshold; moved back afterwards",
                    faults.FaucetDrain(host), AlertCheck("FaucetFewDripsLeft", {"host": host}),
                    (RESOLVED, READY))


def _one_of(what: str, hosts: tuple[str, ...], arg: str | None, last: bool = True) -> str:
    if not hosts:
        raise InputError(f"this network has no {what}; a drill of it needs one")
    if arg is None:
        return hosts[-1] if last else hosts[0]
    if arg not in hosts:
        raise InputError(f"{what} {arg!r} is not in the inventory; name one of {list(hosts)}")
    return arg


SCENARIOS: dict[str, Entry] = {
    "authority-down": Entry("stop an authority (default: the last); FinalityStalled fires",
                            _authority_down, "authority"),
    "rpc-down": Entry("stop the public RPC node; PublicEndpointDown fires", _rpc_down, "host"),
    "service-down": Entry("stop a service (faucet, gateway, ...); ServiceNotReady fires",
                          _service_down, "service"),
    "partition": Entry("cut an authority (default: the last) off from the other nodes;"
                       " FinalityStalled fires", _partition, "authority"),
    "faucet-drain": Entry("the faucet's balance under its threshold; FaucetFewDripsLeft fires",
                          _faucet_drain, "service"),
}


def build(name: str, arg: str | None, topo: Topology) -> Scenario:
    entry = SCENARIOS.get(name)
    if entry is None:
        raise InputError(f"scenario {name!r} is unknown; choose one of {', '.join(SCENARIOS)}")
    if arg is not None and not entry.arg:
        raise InputError(f"scenario {name!r} takes no argument (got {arg!r})")
    return entry.build(topo, arg)

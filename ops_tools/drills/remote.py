"""A network on remote machines (the testnet's shape: ``inventories/testnet``, or the systemd
test hosts) as the drills act on it, reached over SSH with the inventory's connection variables
(``deploy.ssh``): the deployed manifests read on each host, programs stopped and started with
``systemctl`` through ``sudo``, the nodes' RPC and the monitoring (on their machines' loopback)
through local port forwards, and the partition's rules in the hosts' own network namespaces
(``drills.firewall``). The drill's journal and lock stay on the controller, under
``$NET_OPS_STATE/drills/<inventory>``.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from ops_tools.chain.rpc import RpcClient
from ops_tools.deploy.inventory import Inventory, monitoring_urls
from ops_tools.deploy.manifests import MANIFEST_NAME, SERVICE_MANIFEST_NAME
from ops_tools.deploy.paths import NETWORKS
from ops_tools.deploy.ssh import Forwards, Machine
from ops_tools.drills import firewall
from ops_tools.drills.faults import FaultError
from ops_tools.drills.network import LocalNetwork
from ops_tools.drills.scenarios import Topology
from ops_tools.errors import InputError, OpsError
from ops_tools.programs import Program

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def state_root() -> Path:
    """The controller's state of ops-tools (the reset cycle's root too)."""
    env = os.environ.get("NET_OPS_STATE")
    return Path(env).expanduser() if env else Path.home() / ".local" / "state" / "net-ops"


def drill_dir(inventory: Path) -> Path:
    resolved = inventory.resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:8]
    return state_root() / "drills" / f"{resolved.name}-{digest}"


def _plain(hostvars: dict[str, Any], key: str) -> str | None:
    value = hostvars.get(key)
    return None if value is None or "{{" in str(value) else str(value)


class RemoteNetwork(LocalNetwork):
    """The network of an inventory whose hosts are reached over SSH (``close`` when done)."""

    def __init__(self, inventory: Inventory, state: Path | None = None) -> None:
        self.inventory = inventory
        self.state = state or drill_dir(inventory.path)
        self.drill_dir = self.state
        self.forwards = Forwards()
        self.machines = {h: Machine.of(h, inventory.hostvars.get(h, {}))
                         for h in inventory.hosts()}
        try:
            self._read(inventory)
        except BaseException:
            self.close()
            raise

    def _read(self, inventory: Inventory) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        for host in inventory.hosts("authorities") + inventory.hosts("rpc_nodes"):
            hv = inventory.hostvars.get(host, {})
            root = _plain(hv, "node_root_dir") or f"/var/lib/net/{_plain(hv, 'node_name') or host}"
            manifest = self._json(host, f"{root}/{MANIFEST_NAME}")
            if manifest is None:
                raise OpsError(f"{host} has no manifest at {root}/{MANIFEST_NAME}; deploy the"
                               " network first (playbooks/site.yml)")
            self.nodes[host] = manifest
        self.services: dict[str, dict[str, Any]] = {}
        for host in inventory.hosts("services"):
            hv = inventory.hostvars.get(host, {})
            service = _plain(hv, "net_service_role")
            if not service:
                continue
            root = _plain(hv, "service_root_dir") or f"/var/lib/net/{service}"
            manifest = self._json(host, f"{root}/{SERVICE_MANIFEST_NAME}")
            if manifest is not None:
                self.services[host] = {"service": service, **manifest}
        # No monitoring group: the drills that can see their fault on the chain itself (a
        # finality stall) run without Alertmanager, the others are refused (runner.require).
        self.monitored = bool(inventory.hosts("monitoring"))
        self.prometheus_url = self.alertmanager_url = ""
        if self.monitored:
            urls = monitoring_urls(inventory)
            monitor = self.machines[inventory.hosts("monitoring")[0]]
            self.prometheus_url, self.alertmanager_url = (self._reach(monitor, u) for u in urls)
        public = [h for h in inventory.hosts("rpc_nodes") if h in self.nodes]
        self.public_host = public[0] if public else inventory.hosts("authorities")[0]

    def _reach(self, machine: Machine, url: str) -> str:
        """A URL on the machine's loopback, through a local forward; any other as it is."""
        parts = urlsplit(url)
        if parts.hostname not in LOOPBACK:
            return url
        port = parts.port or (443 if parts.scheme == "https" else 80)
        local = self.forwards.port(machine, port)
        return parts._replace(netloc=f"127.0.0.1:{local}").geturl()

    def _json(self, host: str, path: str) -> dict[str, Any] | None:
        proc = self.machines[host].run(f"cat {path} 2>/dev/null || true")
        try:
            data = json.loads(proc.stdout) if proc.stdout.strip() else None
        except ValueError:
            raise OpsError(f"{host}: {path} is not JSON; converge the host again") from None
        return data if isinstance(data, dict) else None

    def close(self) -> None:
        self.forwards.close()

    # ---- topology ----------------------------------------------------------------------------
    def topology(self) -> Topology:
        return Topology(
            authorities=tuple(self.inventory.hosts("authorities")),
            rpc_nodes=tuple(self.inventory.hosts("rpc_nodes")),
            services={h: str(m["service"]) for h, m in self.services.items()},
            firewall=True,
        )

    def slot_s(self) -> float:
        """The slot of the network's definition: ``net_network_definition`` when the inventory
        names one, else chainspec/networks/<inventory directory>.yml."""
        named = next((v for h in self.inventory.hosts()
                      if (v := _plain(self.inventory.hostvars[h], "net_network_definition"))),
                     None)
        path = Path(named) if named else NETWORKS / f"{self.inventory.path.resolve().name}.yml"
        try:
            spec = yaml.safe_load(path.read_text())
            return int(spec["consensus"]["slot_duration_ms"]) / 1000
        except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError) as exc:
            raise InputError(f"the network definition {path} gives no consensus."
                             f"slot_duration_ms ({exc}); set net_network_definition in the"
                             " inventory") from None

    def program(self, host: str) -> Program:
        manifest = self.nodes.get(host) or self.services.get(host)
        if manifest is None:
            raise InputError(f"host {host!r} runs no node or service of {self.inventory.path}")
        return Program.from_manifest(manifest, f"{host}'s deployed manifest")

    # ---- programs ----------------------------------------------------------------------------
    def _act(self, host: str, line: str) -> None:
        proc = self.machines[host].run(line)
        if proc.returncode != 0:
            raise FaultError(f"{host}: `{line}` failed: {(proc.stderr or proc.stdout).strip()}")

    def running(self, host: str) -> bool:
        program = self.program(host)
        proc = self.machines[host].run(
            " ".join(program.argv("status" if program.supervisor else "is-active")))
        return program.running(proc.stdout)

    # ---- nodes -------------------------------------------------------------------------------
    def rpc(self, host: str) -> RpcClient:
        port = self.forwards.port(self.machines[host], int(self.nodes[host]["rpc_port"]))
        return RpcClient(f"http://127.0.0.1:{port}", timeout=5)

    def p2p_endpoint(self, host: str) -> tuple[str, int]:
        """The address and port other nodes dial ``host`` at: ``net_drill_p2p_address`` when
        set, else its ``ansible_host`` (resolved here when a name)."""
        hv = self.inventory.hostvars.get(host, {})
        name = _plain(hv, "net_drill_p2p_address") or self.machines[host].address
        try:
            address = str(ipaddress.ip_address(name))
        except ValueError:
            try:
                infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
            except OSError as exc:
                raise InputError(f"{host}: {name} does not resolve ({exc}); set"
                                 " net_drill_p2p_address to the address its peers dial"
                                 ) from None
            address = str(sorted(infos, key=lambda i: i[0] != socket.AF_INET)[0][4][0])
        return address, int(self.nodes[host]["p2p_port"])

    def p2p_address(self, host: str) -> str:
        address, port = self.p2p_endpoint(host)
        proto = "ip6" if ":" in address else "ip4"
        return f"/{proto}/{address}/tcp/{port}/p2p/{self.peer_id(host)}"

    # ---- the partition's rules ---------------------------------------------------------------
    def _nft(self, host: str, line: str, what: str) -> str:
        proc = self.machines[host].run(line)
        if proc.returncode == 127 or "nft: not found" in proc.stderr \
                or "nft: command not found" in proc.stderr:
            raise FaultError(f"{host} has no nft; install Debian's nftables there (the partition"
                             " drill's rules are nftables rules)")
        if proc.returncode != 0:
            raise FaultError(f"{host}: {what} failed: {(proc.stderr or proc.stdout).strip()}")
        return proc.stdout

    def block(self, host: str, peers: list[tuple[str, int]], anyone: bool = False) -> None:
        own = self.p2p_endpoint(host)[1]
        self._nft(host, firewall.apply_command(host, own, peers, anyone),
                  f"loading nftables table {firewall.table(host)}")

    def unblock(self, host: str) -> None:
        self._nft(host, firewall.remove_command(host),
                  f"deleting nftables table {firewall.table(host)}")

    def blocked(self, host: str) -> bool:
        proc = self.machines[host].run(firewall.present_command(host))
        return proc.returncode == 0

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "remote": True}


def open_network(inventory: Inventory) -> LocalNetwork:
    """The local network for an inventory with ``net_localnet: true``, else its machines over
    SSH; ``close()`` it when done."""
    if any(v.get("net_localnet") is True for v in inventory.hostvars.values()):
        return LocalNetwork(inventory)
    if not inventory.hosts("authorities"):
        raise InputError(f"inventory {inventory.path} has no host in group authorities; name"
                         " the inventory of a deployed network")
    return RemoteNetwork(inventory)

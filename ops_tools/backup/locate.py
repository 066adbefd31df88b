"""Where the things a backup saves live, from the inventory and the deployed manifests: each
node's key and keystore (``deployed.json`` of roles/node), each service's database (its
configuration file of roles/service), the release the nodes run (binary and spec of the node
manifests). Backup and restore both ask here, so restore writes where the deployment keeps a
thing now, never where a name inside an archive points.

Hosts on this machine (``ansible_connection: local``, as the local network's) are read
directly, the others over ``ssh`` with the inventory's connection variables and ``sudo -n``
(``backup.hostio``): each site carries the ``HostIO`` it is reached through.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ops_tools.backup import hostio
from ops_tools.backup.hostio import LOCAL, HostIO
from ops_tools.backup.manifest import check_component
from ops_tools.deploy.inventory import Inventory
from ops_tools.deploy.manifests import MANIFEST_NAME, SERVICE_MANIFEST_NAME
from ops_tools.deploy.paths import localnet_dir, supervisor_conf
from ops_tools.errors import InputError, OpsError
from ops_tools.programs import Program

# Inventory group -> the service whose database is saved (the others keep nothing that a
# resync from the chain would not rebuild: the indexer re-indexes, the explorer keeps nothing).
DATABASE_SERVICES = {"faucet": "faucet", "gateways": "gateway", "attestation": "attestation"}
NODE_GROUPS = ("authorities", "rpc_nodes", "full_nodes")
MAX_CONFIG_BYTES = 1024 * 1024


@dataclass(frozen=True)
class NodeSite:
    host: str
    role: str
    manifest: dict[str, Any]
    io: HostIO = field(default=LOCAL, compare=False, repr=False)

    def _path(self, key: str) -> Path:
        value = self.manifest.get(key)
        if not value:
            raise OpsError(f"{self.host}: its deployed manifest has no {key}; re-converge it"
                           " with playbooks/site.yml")
        return Path(str(value))

    @property
    def node_key_path(self) -> Path:
        return self._path("node_key_path")

    @property
    def keystore_path(self) -> Path:
        return self._path("keystore_path")

    @property
    def chainspec_path(self) -> Path:
        return self._path("chainspec_path")

    @property
    def binary_path(self) -> Path:
        return Path(str((self.manifest.get("binary") or {}).get("path") or ""))

    @property
    def program(self) -> Program:
        return Program.from_manifest(self.manifest, f"{self.host}'s host manifest")

    @property
    def rpc_url(self) -> str:
        """Its RPC, which listens on its machine's loopback (a forward for a remote one)."""
        return self.io.url(int(self.manifest["rpc_port"]))


@dataclass(frozen=True)
class ServiceSite:
    host: str
    service: str
    database_url: str
    program: Program
    io: HostIO = field(default=LOCAL, compare=False, repr=False)

    @property
    def engine(self) -> str:
        return "postgresql" if self.database_url.startswith("postgres") else "sqlite"

    @property
    def sqlite_path(self) -> Path:
        # sqlite:///relative or sqlite:////absolute, as SQLAlchemy reads it
        return Path(self.database_url.split(":///", 1)[1].split("?", 1)[0])


@dataclass(frozen=True)
class Deployment:
    inventory: Inventory
    nodes: list[NodeSite]
    undeployed: list[str]  # node hosts of the inventory without a manifest
    services: list[ServiceSite]
    ios: list[HostIO] = field(default_factory=list, repr=False)

    def close(self) -> None:
        """Stop what reaching the hosts holds open (a remote node's RPC forward)."""
        for io in self.ios:
            io.close()

    def __enter__(self) -> Deployment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def node(self, host: str) -> NodeSite | None:
        return next((n for n in self.nodes if n.host == host), None)

    def service(self, host: str) -> ServiceSite | None:
        return next((s for s in self.services if s.host == host), None)

    def network(self) -> dict[str, str]:
        """The genesis and chain id every deployed node records; refuses a split network."""
        if not self.nodes:
            raise InputError(f"inventory {self.inventory.path}: no node of it is deployed (no"
                             f" {MANIFEST_NAME}); deploy it with playbooks/site.yml first")
        seen = {(str(n.manifest.get("genesis_hash")), str(n.manifest.get("chain_id")))
                for n in self.nodes}
        if len(seen) != 1:
            by_host = {n.host: n.manifest.get("genesis_hash") for n in self.nodes}
            raise OpsError(f"inventory {self.inventory.path}: the nodes record different"
                           f" genesis hashes {by_host}; finish the reset (ops-tools reset-cycle"
                           " --resume) before a backup or restore")
        genesis, chain_id = seen.pop()
        return {"genesis_hash": genesis, "chain_id": chain_id}


def _var(inv: Inventory, name: str, default: Any = None) -> Any:
    """A network-wide variable as the first host that sets it plainly has it (untemplated)."""
    for host in inv.hosts():
        value = inv.hostvars[host].get(name)
        if value is not None and "{{" not in str(value):
            return value
    return default


def _plain(hv: dict[str, Any], name: str) -> str | None:
    value = hv.get(name)
    return None if value is None or "{{" in str(value) else str(value)


def _read_json(io: HostIO, path: Path) -> dict[str, Any] | None:
    try:
        raw = io.read(path, MAX_CONFIG_BYTES, f"the manifest {path}")
        data = json.loads(raw) if raw is not None else None
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def node_manifest_path(inv: Inventory, host: str) -> Path:
    if _var(inv, "net_localnet", False):
        return localnet_dir() / host / MANIFEST_NAME
    hv = inv.hostvars.get(host, {})
    root = _plain(hv, "node_root_dir") or f"/var/lib/net/{_plain(hv, 'node_name') or host}"
    return Path(root) / MANIFEST_NAME


def _service_root(inv: Inventory, host: str, service: str) -> Path:
    if _var(inv, "net_localnet", False):
        return localnet_dir() / host
    return Path(_plain(inv.hostvars.get(host, {}), "service_root_dir")
                or f"/var/lib/net/{service}")


def _service_program(inv: Inventory, host: str, service: str, root: Path,
                     io: HostIO) -> Program:
    hv = inv.hostvars.get(host, {})
    recorded = _read_json(io, root / SERVICE_MANIFEST_NAME) or {}
    manager = _plain(hv, "service_manager") or _var(inv, "net_service_manager", "systemd")
    if _var(inv, "net_localnet", False):
        conf = supervisor_conf(localnet_dir())
    else:
        conf = Path(_plain(hv, "service_supervisor_root_dir") or "/var/lib/net/supervisor") \
            / "supervisord.conf"
    return Program(str(manager), str(recorded.get("name") or f"net-{service}"),
                   str(conf) if manager == "supervisor" else "")


def service_site(inv: Inventory, host: str, service: str,
                 io: HostIO = LOCAL) -> ServiceSite | None:
    """The service on ``host`` as its configuration file says, or None when not deployed."""
    root = _service_root(inv, host, service)
    config = root / f"{service}.yml"
    try:
        raw = io.read(config, MAX_CONFIG_BYTES, f"{host}'s service configuration")
        if raw is None:
            return None
        settings = yaml.safe_load(raw) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise OpsError(f"{host}: cannot read {config} ({exc}); re-converge the service") from None
    if not isinstance(settings, dict):
        raise OpsError(f"{host}: {config} is not a mapping; re-converge the service")
    url = settings.get("database_url")
    if not url:
        # the service's default (services/common/settings.py): SQLite in its state directory
        url = f"sqlite:///{Path(str(settings.get('state_dir') or root)) / (service + '.db')}"
    return ServiceSite(host, service, str(url), _service_program(inv, host, service, root, io),
                       io)


def locate(inv: Inventory, hosts: list[str] | None = None) -> Deployment:
    """The deployment of ``inv`` (of ``hosts`` only, when given)."""
    wanted = set(hosts) if hosts else None
    unknown = sorted((wanted or set()) - set(inv.hosts()))
    if unknown:
        raise InputError(f"--host {', '.join(unknown)}: not a host of inventory {inv.path}")
    ios: dict[Any, HostIO] = {}

    def io_of(host: str) -> HostIO:
        # One connection per machine: a machine's inventory hosts share its forwards.
        io = hostio.of(host, inv.hostvars.get(host, {}))
        key = getattr(getattr(io, "machine", None), "key", None)
        return ios.setdefault(key, io) if key is not None else io

    nodes: list[NodeSite] = []
    undeployed: list[str] = []
    services: list[ServiceSite] = []
    try:
        for group in NODE_GROUPS:
            for host in inv.hosts(group):
                check_component(host, "inventory host")
                io = io_of(host)
                manifest = _read_json(io, node_manifest_path(inv, host))
                if manifest is None:
                    undeployed.append(host)
                else:
                    nodes.append(NodeSite(host, inv.role_of(host), manifest, io))
        for group, service in DATABASE_SERVICES.items():
            for host in inv.hosts(group):
                if wanted is not None and host not in wanted:
                    continue
                check_component(host, "inventory host")
                site = service_site(inv, host, service, io_of(host))
                if site is not None:
                    services.append(site)
    except BaseException:
        for io in ios.values():
            io.close()
        raise
    return Deployment(inv, nodes, undeployed, services, list(ios.values()))

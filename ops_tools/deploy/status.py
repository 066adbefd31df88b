"""Per-host status of a deployed network, gathered on each host by ``playbooks/status.yml``."""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ops_tools.deploy.paths import INVENTORIES, PLAYBOOKS, localnet_dir
from ops_tools.deploy.runner import run_playbook


@dataclass(frozen=True)
class HostStatus:
    host: str
    role: str
    service: str
    best: int | None
    finalized: int | None
    peers: int | None
    genesis: str | None
    deployed_genesis: str | None
    genesis_match: bool | None
    version: str | None
    error: str | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ServiceStatus:
    """A public service's readiness and each of its checks (name, ok, detail)."""

    host: str
    role: str
    service: str
    url: str
    ready: bool
    checks: list[dict[str, Any]]
    error: str | None

    @property
    def genesis_match(self) -> bool:
        return self.ready

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def parse_status_file(data: dict[str, Any]) -> HostStatus | ServiceStatus:
    if data.get("role") == "service":
        return ServiceStatus(
            host=data["host"], role="service", service=str(data.get("service")),
            url=str(data.get("url") or ""), ready=bool(data.get("ready")),
            checks=list(data.get("checks") or []), error=data.get("error") or None,
        )
    rpc = data.get("rpc") or {}
    manifest = data.get("manifest") or {}
    health = rpc.get("health") or {}
    return HostStatus(
        host=data["host"],
        role=str(data.get("role") or "?"),
        service=str((data.get("service") or {}).get("state") or "unknown"),
        best=(rpc.get("best") or {}).get("number"),
        finalized=(rpc.get("finalized") or {}).get("number"),
        peers=health.get("peers"),
        genesis=rpc.get("genesis_hash"),
        deployed_genesis=manifest.get("genesis_hash"),
        genesis_match=data.get("genesis_match"),
        version=rpc.get("version"),
        error=rpc.get("error") or data.get("manifest_error"),
    )


def gather(inventory: Path) -> list[HostStatus | ServiceStatus]:
    extra: dict[str, Any] = {}
    if inventory.resolve() == (INVENTORIES / "local").resolve():
        extra["net_state_dir"] = str(localnet_dir())
    with tempfile.TemporaryDirectory(prefix="ops-tools-status-") as out:
        run_playbook(PLAYBOOKS / "status.yml", inventory, {**extra, "status_out_dir": out})
        files = sorted(Path(out).glob("*.json"))
        return [parse_status_file(json.loads(f.read_text())) for f in files]

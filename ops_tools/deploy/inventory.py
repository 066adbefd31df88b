"""Reading an inventory the way Ansible sees it (``ansible-inventory --list``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ops_tools.errors import InputError, OpsError


@dataclass(frozen=True)
class Inventory:
    path: Path
    groups: dict[str, list[str]]
    hostvars: dict[str, dict[str, Any]]

    def hosts(self, group: str = "all") -> list[str]:
        if group == "all":
            return sorted(self.hostvars)
        return list(self.groups.get(group, []))

    def role_of(self, host: str) -> str:
        for group, role in (
            ("authorities", "authority"),
            ("rpc_nodes", "rpc"),
            ("full_nodes", "full"),
        ):
            if host in self.groups.get(group, []):
                return role
        return "other"


def _ansible_inventory() -> str:
    sibling = Path(sys.executable).with_name("ansible-inventory")
    return (
        str(sibling)
        if sibling.exists()
        else (shutil.which("ansible-inventory") or "ansible-inventory")
    )


def load_inventory(path: Path) -> Inventory:
    if not path.exists():
        raise InputError(f"inventory {path}: no such file or directory")
    proc = subprocess.run(
        [_ansible_inventory(), "-i", str(path), "--list"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise OpsError(f"inventory {path}: ansible-inventory failed: {last}")
    data = json.loads(proc.stdout)
    hostvars = data.get("_meta", {}).get("hostvars", {})
    groups: dict[str, list[str]] = {}

    def collect(group: str) -> list[str]:
        node = data.get(group, {})
        hosts = list(node.get("hosts", []))
        for child in node.get("children", []):
            hosts += collect(child)
        return hosts

    for group in data:
        if group != "_meta":
            groups[group] = sorted(set(collect(group)))
    for host in hostvars:
        hostvars.setdefault(host, {})
    return Inventory(path, groups, hostvars)

"""Reading an inventory the way Ansible sees it (what ``ansible-inventory --list`` prints).

The variables are read in this process with Ansible's own inventory and variable managers, the
calls ``ansible-inventory --list`` makes, which saves an interpreter start (about a second).
Whatever that path cannot answer exactly the same way (vault secrets to set up, an inventory
Ansible rejects) goes to the ``ansible-inventory`` subprocess, which stays the reference: its
error messages are the ones users see.
"""

from __future__ import annotations

import contextlib
import io
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
    listing = _list_in_process(path)
    if listing is None:
        listing = _list_with_subprocess(path)
    return _from_listing(path, listing)


def _list_with_subprocess(path: Path) -> dict[str, Any]:
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
    return json.loads(proc.stdout)


_plugin_loader_ready = False


def _list_in_process(path: Path) -> dict[str, Any] | None:
    """``ansible-inventory -i PATH --list`` without its process, or None where that could differ.

    Mirrors ``InventoryCLI.json_inventory`` and ``_get_host_variables`` (no ``--export``): each
    host's variables as the variable manager combines them (inventory, group_vars, host_vars,
    vars plugins), not templated, minus Ansible's internal ones, through the same JSON encoder.
    """
    # Ansible reports through its display on our stdout/stderr; ansible-inventory's stderr was
    # discarded on success, and our stdout may be JSON: keep both clean.
    noise = io.StringIO()
    try:
        with contextlib.redirect_stdout(noise), contextlib.redirect_stderr(noise):
            from ansible import constants

            if constants.DEFAULT_VAULT_IDENTITY_LIST or constants.DEFAULT_VAULT_PASSWORD_FILE:
                return None  # the CLI sets up vault secrets: let it do that
            return _ansible_listing(path, constants)
    except Exception:  # any failure: the subprocess gives the canonical answer (or error)
        return None


def _ansible_listing(path: Path, constants: Any) -> dict[str, Any]:
    from ansible._internal._json._profiles import _inventory_legacy
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.loader import init_plugin_loader
    from ansible.vars.manager import VariableManager

    global _plugin_loader_ready  # once per process, as in Ansible's CLI
    if not _plugin_loader_ready:
        init_plugin_loader()
        _plugin_loader_ready = True
    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(path)])
    variables = VariableManager(loader=loader, inventory=manager)
    hostvars: dict[str, Any] = {}
    for host in manager.get_hosts("all"):
        values = variables.get_vars(host=host, include_hostvars=False, stage="all")
        for internal in constants.INTERNAL_STATIC_VARS:
            values.pop(internal, None)
        if values:
            hostvars[host.name] = values
    listing: dict[str, Any] = {
        name: {"hosts": sorted(h.name for h in group.get_hosts())}
        for name, group in manager.groups.items()
    }
    listing["_meta"] = {"hostvars": hostvars}
    # The CLI's encoder turns Ansible's value types (tagged strings, vault-encrypted values)
    # into the JSON it prints; decoding that gives exactly the subprocess's values.
    return json.loads(json.dumps(listing, cls=_inventory_legacy.Encoder))


def _from_listing(path: Path, data: dict[str, Any]) -> Inventory:
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


def monitoring_urls(inv: Inventory) -> tuple[str, str]:
    """(prometheus_url, alertmanager_url) of the inventory's monitoring host (plain values in
    its group_vars, read without templating)."""
    hosts = inv.hosts("monitoring")
    if not hosts:
        raise InputError(f"inventory {inv.path}: no host in group monitoring; deploy"
                         " roles/monitoring (docs/monitoring.md) or name another inventory")
    hv: dict[str, Any] = inv.hostvars.get(hosts[0], {})
    urls = []
    for key in ("monitoring_prometheus_url", "monitoring_alertmanager_url"):
        value = str(hv.get(key, ""))
        if not value or "{{" in value:
            raise InputError(f"inventory {inv.path}: {hosts[0]}'s {key} is {value!r}; set it to a"
                             " plain http(s)://HOST:PORT in the monitoring group's vars")
        urls.append(value)
    return urls[0], urls[1]

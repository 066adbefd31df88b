"""The nodes of an inventory as their host manifests describe them, and where each one runs.

Kept free of pyinfra, so that deciding whether a reset is needed (reading manifests and asking
nodes over loopback) does not pay for importing it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from ops_tools.errors import OpsError

LOCAL = "@local"


class HostOpFailed(OpsError):
    pass


@dataclass(frozen=True)
class Node:
    """One node of the inventory, as its host manifest describes it."""

    host: str
    role: str
    manifest: dict[str, Any]

    @property
    def rpc_port(self) -> int:
        return int(self.manifest["rpc_port"])

    def _service(self, action: str) -> str:
        service = self.manifest["service"]
        if service["manager"] == "supervisor":
            return shlex.join(
                ["supervisorctl", "-c", service["supervisor_conf"], action, service["name"]]
            )
        return shlex.join(["systemctl", action, service["name"]])

    def stop_command(self) -> str:
        return self._service("stop")

    def start_command(self) -> str:
        # supervisorctl answers "already started" with a non-zero status: make start idempotent
        # so that a resumed cycle can start what an interrupted one already started.
        if self.manifest["service"]["manager"] == "supervisor":
            status = self._service("status")
            return f"{status} >/dev/null 2>&1 || {self._service('start')}"
        return self._service("start")

    def purge_command(self) -> str:
        m = self.manifest
        return shlex.join(
            [
                m["binary"]["path"],
                "purge-chain",
                "--base-path",
                m["base_path"],
                "--chain",
                m["chainspec_path"],
                "-y",
            ]
        )


def machine_of(hostvars: dict[str, Any], host: str) -> tuple[str, dict[str, Any]]:
    """The pyinfra name and connection data of an inventory host."""
    if hostvars.get("ansible_connection") == "local":
        return LOCAL, {}
    data: dict[str, Any] = {"ssh_hostname": hostvars.get("ansible_host", host)}
    if "ansible_port" in hostvars:
        data["ssh_port"] = int(hostvars["ansible_port"])
    if "ansible_user" in hostvars:
        data["ssh_user"] = hostvars["ansible_user"]
    if "ansible_ssh_private_key_file" in hostvars:
        data["ssh_key"] = hostvars["ansible_ssh_private_key_file"]
    data["ssh_strict_host_key_checking"] = hostvars.get(
        "net_ssh_strict_host_key_checking", "accept-new"
    )
    return f"{data['ssh_hostname']}:{data.get('ssh_port', 22)}", data


def is_local(hostvars: dict[str, Any], host: str) -> bool:
    """Whether the host is this machine (Ansible's local connection)."""
    return machine_of(hostvars, host)[0] == LOCAL

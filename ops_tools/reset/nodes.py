"""The nodes of an inventory as their host manifests describe them, and where each one runs.

Kept free of pyinfra, so that deciding whether a reset is needed (reading manifests and asking
nodes over loopback) does not pay for importing it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from ops_tools.errors import OpsError
from ops_tools.programs import Program

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

    @property
    def program(self) -> Program:
        return Program.from_manifest(self.manifest, f"{self.host}'s host manifest")

    def stop_command(self) -> str:
        return self.program.stop()

    def start_command(self) -> str:
        # idempotent: a resumed cycle can start what an interrupted one already started
        return self.program.start()

    def restart_command(self) -> str:
        """Start a node that is down; restart one whose process runs but does not answer."""
        return self.program.restart()

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
    # The reset runs as root where the roles do (become): systemctl, purging the service user's
    # chain data, writing binary and spec.
    if _truthy(hostvars.get("ansible_become", False)):
        data["_sudo"] = True
        if hostvars.get("ansible_become_user") not in (None, "root"):
            data["_sudo_user"] = hostvars["ansible_become_user"]
    # Host keys are checked as Ansible checks them (ansible.cfg: host_key_checking = true): a
    # host whose key is not known is refused, never silently added; the known-hosts file and
    # StrictHostKeyChecking come from the SSH arguments the inventory gives Ansible.
    options = ssh_options(hostvars)
    if "userknownhostsfile" in options:
        data["ssh_known_hosts_file"] = options["userknownhostsfile"]
    checking = _truthy(hostvars.get("ansible_host_key_checking",
                                    hostvars.get("ansible_ssh_host_key_checking", True)))
    data["ssh_strict_host_key_checking"] = options.get(
        "stricthostkeychecking", "yes" if checking else "no")
    return f"{data['ssh_hostname']}:{data.get('ssh_port', 22)}", data


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def ssh_options(hostvars: dict[str, Any]) -> dict[str, str]:
    """The ``-o Name=value`` options of the host's Ansible SSH arguments, by lower-case name."""
    words: list[str] = []
    for var in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        words += shlex.split(str(hostvars.get(var) or ""))
    options: dict[str, str] = {}
    for i, word in enumerate(words):
        if word == "-o" and i + 1 < len(words):
            word = words[i + 1]
        elif word.startswith("-o"):
            word = word[2:]
        else:
            continue
        name, sep, value = word.partition("=")
        if sep:
            options.setdefault(name.strip().lower(), value.strip())
    return options


def is_local(hostvars: dict[str, Any], host: str) -> bool:
    """Whether the host is this machine (Ansible's local connection)."""
    return machine_of(hostvars, host)[0] == LOCAL

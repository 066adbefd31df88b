"""What a reset does to each off-chain service (indexer, faucet, attestation, gateway, ...).

Each service declares itself in the inventory (``net_services``), so that a new service plugs
into the cycle without changing it:

    net_services:
      - name: indexer
        host: services-0
        reset: wipe            # wipe | reseed | archive | restart
        program: {manager: systemd, name: net-indexer}   # or stop: / start: commands
        wipe: "rm -rf /var/lib/net/indexer/db"            # for reset: wipe
        archive: "tar -C /var/lib/net -czf /var/backups/indexer-$(date +%s).tgz indexer"
        reseed: "/opt/net/bin/faucet-reseed"              # for reset: reseed

Stop runs before the nodes stop; after the network serves the new genesis, the declared action
runs, then start. A service that names its ``program`` (as a deployed manifest does:
manager, name, supervisor_conf) is stopped and started through its service manager
(``ops_tools.programs``); one that does not gives its own ``stop`` and ``start`` commands.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ops_tools.errors import InputError
from ops_tools.programs import Program

ACTIONS = ("wipe", "reseed", "archive", "restart")


@dataclass(frozen=True)
class ServiceHook:
    name: str
    host: str
    action: str
    stop: str
    start: str
    action_command: str | None

    def after_reset(self) -> list[str]:
        return ([self.action_command] if self.action_command else []) + [self.start]


def load_hooks(declared: Any, hosts: set[str]) -> list[ServiceHook]:
    if not declared:
        return []
    if not isinstance(declared, list):
        raise InputError("inventory variable net_services must be a list of service declarations")
    hooks = []
    for i, entry in enumerate(declared):
        where = f"net_services[{i}]"
        if not isinstance(entry, dict):
            raise InputError(f"{where}: expected a mapping")
        for field in ("name", "host", "reset"):
            if field not in entry:
                raise InputError(f"{where}: missing field '{field}'")
        stop, start = _stop_start(entry, where)
        action = entry["reset"]
        if action not in ACTIONS:
            raise InputError(f"{where}.reset: {action!r} is not one of {', '.join(ACTIONS)}")
        if entry["host"] not in hosts:
            raise InputError(f"{where}.host: {entry['host']!r} is not a host of the inventory")
        command = entry.get(action) if action != "restart" else None
        if action != "restart" and not command:
            raise InputError(f"{where}: reset is {action!r} but no '{action}' command is given")
        hooks.append(
            ServiceHook(
                entry["name"], entry["host"], action, stop, start, command
            )
        )
    return hooks


def _stop_start(entry: dict[str, Any], where: str) -> tuple[str, str]:
    if "program" in entry:
        if not isinstance(entry["program"], dict):
            raise InputError(f"{where}.program: expected a mapping (manager, name,"
                             " supervisor_conf)")
        program = Program.of(entry["program"])
        return program.stop(), program.start()
    for field in ("stop", "start"):
        if field not in entry:
            raise InputError(f"{where}: give 'program' or the '{field}' command")
    return str(entry["stop"]), str(entry["start"])

"""Before a local network is brought up: are the ports its inventory gives its nodes free?

Without this check a second network on the same ports (another ``NET_LOCALNET_DIR``) renders
its spec, starts its supervisord and runs the whole playbook before its nodes find their ports
taken; the node role's wait then names the conflict after about a minute. Asked first, the
answer costs a bind per port.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ops_tools.deploy.inventory import Inventory

# The node ports the local inventory sets per host (roles/node's variables).
NODE_PORT_VARS = ("node_rpc_port", "node_p2p_port", "node_prometheus_port")


@dataclass(frozen=True)
class HostPort:
    host: str
    var: str
    port: int


def node_ports(inv: Inventory) -> list[HostPort]:
    """The ports the inventory's hosts set explicitly, in host order."""
    ports = []
    for host in inv.hosts():
        for var in NODE_PORT_VARS:
            value = inv.hostvars.get(host, {}).get(var)
            if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536:
                ports.append(HostPort(host, var, value))
    return ports


def bind_free(port: int, address: str = "127.0.0.1") -> bool:
    """True when a listener could take ``address:port`` now: a socket in TIME_WAIT does not
    count (SO_REUSEADDR), a listener on the address or on the wildcard does."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((address, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise
    return True


def taken(ports: Iterable[HostPort], is_free: Callable[[int], bool] = bind_free) -> list[HostPort]:
    return [p for p in ports if not is_free(p.port)]


def conflict_message(busy: list[HostPort], state: str, inventory: str) -> str:
    names = ", ".join(f"{p.port} ({p.host}'s {p.var})" for p in busy)
    return (
        f"ports of {inventory} are in use: {names}, and the local network in {state} is not"
        " running: another network on the same ports, or another program, holds them. Stop it"
        " (ops-tools localnet down with that network's NET_LOCALNET_DIR) or free the ports,"
        " then run localnet up again"
    )

"""The partition drill's firewall rules on a systemd host (pure): one nftables table of the drill
per inventory host, dropping the node's p2p traffic to and from the nodes on the other side of
the cut, in both directions (their dials to this node's p2p port, its dials to theirs, and the
replies). A table of its own is removed whole, leaves every other rule of the host alone, and is
seen (``nft list table``) or not.

The rules go into the host's own network namespace (``sudo nft -f -`` over SSH), as an operator
partitions real servers; nothing on the controller changes.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from collections.abc import Iterable

from ops_tools.errors import InputError

# A table name: letters, digits and _; the inventory host's name is folded into it.
TABLE_PREFIX = "net_drill_"
FAMILY = "inet"
# Before the usual filter chains (priority 0), so that an accept there does not let the p2p
# traffic through first; a drop in any base chain is final.
PRIORITY = -10
MAX_PEERS = 64


def table(host: str) -> str:
    return TABLE_PREFIX + re.sub(r"[^A-Za-z0-9_]", "_", host)


def _addr(address: str) -> tuple[str, str]:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        raise InputError(f"p2p address {address!r} is not an IP address; the partition drill"
                         " needs the address other nodes dial (ansible_host, or"
                         " net_drill_p2p_address)") from None
    return ("ip" if ip.version == 4 else "ip6"), str(ip)


def _port(port: int, what: str) -> int:
    if not 0 < int(port) < 65536:
        raise InputError(f"{what} {port!r} is not a TCP port (1-65535)")
    return int(port)


def ruleset(host: str, own_port: int, peers: Iterable[tuple[str, int]],
            anyone: bool = False) -> str:
    """The table that cuts ``host`` (its node listening on ``own_port``) off from ``peers``
    ((address, p2p port) each), replacing any table of an earlier injection in one transaction:
    applying it twice leaves one table. With ``anyone``, from every address on those p2p ports
    (the cut authority: a node outside the inventory, an operator's full node, would otherwise
    relay its votes)."""
    own = _port(own_port, "own p2p port")
    peers = sorted(set(peers))
    if not peers or len(peers) > MAX_PEERS:
        raise InputError(f"the partition of {host} names {len(peers)} peers; give 1 to"
                         f" {MAX_PEERS}")
    inbound, outbound = [], []
    for address, port in peers:
        fam, ip = _addr(address)
        port = _port(port, f"p2p port of {address}")
        if anyone:
            continue
        inbound += [f"{fam} saddr {ip} tcp sport {port} drop",
                    f"{fam} saddr {ip} tcp dport {own} drop"]
        outbound += [f"{fam} daddr {ip} tcp dport {port} drop",
                     f"{fam} daddr {ip} tcp sport {own} drop"]
    if anyone:
        ports = sorted({own, *(int(p) for _, p in peers)})
        inbound += [f"tcp sport {p} drop" for p in ports] + [f"tcp dport {own} drop"]
        outbound += [f"tcp dport {p} drop" for p in ports] + [f"tcp sport {own} drop"]
    name = table(host)

    def chain(hook: str, rules: list[str]) -> str:
        body = "\n".join(f"    {r}" for r in rules)
        return (f"  chain {hook} {{\n    type filter hook {hook} priority {PRIORITY};"
                f" policy accept;\n{body}\n  }}")

    return (f"table {FAMILY} {name}\ndelete table {FAMILY} {name}\n"
            f"table {FAMILY} {name} {{\n{chain('input', inbound)}\n"
            f"{chain('output', outbound)}\n}}\n")


def apply_command(host: str, own_port: int, peers: Iterable[tuple[str, int]],
                  anyone: bool = False) -> str:
    """The shell line that loads the table (through ``nft -f -`` from a here-document)."""
    return f"nft -f - <<'NET_DRILL_EOF'\n{ruleset(host, own_port, peers, anyone)}NET_DRILL_EOF"


def remove_command(host: str) -> str:
    """Removes the drill's table; nothing to remove is no error (a resumed drill repeats it)."""
    name = shlex.quote(table(host))
    return (f"nft -f - <<'NET_DRILL_EOF'\ntable {FAMILY} {name}\n"
            f"delete table {FAMILY} {name}\nNET_DRILL_EOF")


def present_command(host: str) -> str:
    """Prints the table's rules when it is there; exits 1 when it is not."""
    return f"nft list table {FAMILY} {shlex.quote(table(host))}"

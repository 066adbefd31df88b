"""Which address a request came from, without letting a client choose it.

The peer address is the client, unless the peer is one of the configured trusted proxies: then
``X-Forwarded-For`` is read from the right (each proxy appends the address it saw), skipping the
trusted proxies, and the first address that is not one of them is the client: the entry the last
trusted proxy appended. Anything a client wrote further left is never reached.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _trusted(address: str, trusted: Sequence[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in trusted)


def client_ip(peer: str, forwarded_for: Iterable[str], trusted: Sequence[Network]) -> str:
    """The client's address from the peer and every ``X-Forwarded-For`` header value."""
    if not _trusted(peer, trusted):
        return peer
    hops = [h.strip() for value in forwarded_for for h in value.split(",") if h.strip()]
    client = peer
    for hop in reversed(hops):
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            # A trusted proxy appended something that is no address: trust stops here.
            return client
        client = hop
        if not _trusted(hop, trusted):
            return hop
    return client

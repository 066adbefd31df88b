"""Where the gateway may send requests: a worker's endpoint must be a public address unless the
deployment allows private ones (the local network does; a public network does not, or any
announcement could point the gateway at its own host's or its network's internal services).

An IP literal is judged as written; a host name by every address it resolves to, at announcement
and again at every connection (``PublicResolver``), so a name that later resolves elsewhere is
refused then.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver

RESOLVE_TIMEOUT_S = 3.0
RULE = "allow_private_endpoints"


def is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def _literal(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return None


def refusal(host: str, addresses: list[str]) -> str | None:
    """Why ``host`` (resolved to ``addresses``) may not be a worker endpoint; None: it may."""
    if not addresses:
        return f"endpoint host {host!r} does not resolve"
    private = sorted({a for a in addresses if not is_public(a)})
    if private:
        shown = host if private == [host] else f"{host!r} (resolves to {', '.join(private)})"
        return (f"endpoint host {shown} is a loopback, private or link-local address; this"
                f" gateway does not allow them ({RULE} is false): announce a public address")
    return None


async def endpoint_problem(
    endpoint: str, *, allow_private: bool,
    resolve: Callable[[str], Awaitable[list[str]]] | None = None,
) -> str | None:
    """None when the gateway may call ``endpoint``, else why not."""
    host = urlsplit(endpoint).hostname
    if not host:
        return f"endpoint {endpoint!r} has no host"
    if allow_private:
        return None
    literal = _literal(host)
    if literal is not None:
        return refusal(literal, [literal])
    try:
        addresses = await (resolve or resolve_host)(host)
    except (OSError, TimeoutError):
        addresses = []
    return refusal(host, addresses)


async def resolve_host(host: str) -> list[str]:
    loop = asyncio.get_running_loop()
    infos = await asyncio.wait_for(
        loop.getaddrinfo(host, None, type=socket.SOCK_STREAM), RESOLVE_TIMEOUT_S)
    return [str(info[4][0]) for info in infos]


class PublicResolver(AbstractResolver):
    """aiohttp's resolver, refusing a name with any non-public address (IP literals do not
    reach a resolver: they are checked at announcement)."""

    def __init__(self) -> None:
        self._inner = ThreadedResolver()

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        problem = refusal(host, [r["host"] for r in results])
        if problem:
            raise OSError(problem)
        return results

    async def close(self) -> None:
        await self._inner.close()

"""The faucet's limits as pure logic: which counters a request touches and how a refusal reads.

The database counts and reserves atomically (``ops_tools.services.common.ratelimit``); this
module decides the rules of one request (per recipient, per client IP unless the client is in an
exempt network, the global hourly cap), the balance cap, and the words and fields of a refusal.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from ops_tools.services.common.ratelimit import LimitExceeded, Rule
from ops_tools.services.faucet.config import HOUR, LimitsConfig

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

RECIPIENT, IP, GLOBAL = "recipient", "ip", "global"
_SCOPE = {RECIPIENT: "per recipient", IP: "per client IP", GLOBAL: "in total"}


def rules_for(limits: LimitsConfig, recipient: str, client_ip: str) -> list[Rule]:
    """The rules a request counts against; an exempt client skips only the IP rule."""
    rules = [Rule(RECIPIENT, recipient, 1, limits.recipient_window_s)]
    if not is_in(client_ip, limits.exempt_networks):
        rules.append(Rule(IP, client_ip, limits.per_ip.count, limits.per_ip.window_s))
    rules.append(Rule(GLOBAL, "all", limits.global_per_hour, HOUR))
    return rules


def describe(name: str, limit: int, window_s: float) -> str:
    plural = "s" if limit != 1 else ""
    return f"{limit} drip{plural} {_SCOPE.get(name, name)} per {span(window_s)}"


def refusal(exc: LimitExceeded) -> tuple[str, str, dict[str, Any]]:
    """(code, message, details) of a 429 for the rule that refused."""
    code = f"{exc.rule}_limit"
    if exc.limit <= 0:
        message = f"drips {_SCOPE.get(exc.rule, exc.rule)} are switched off on this faucet"
    else:
        message = (
            f"limit reached: {describe(exc.rule, exc.limit, exc.window_s)}; the next drip is"
            f" allowed in {span(exc.retry_after)} (at {iso(exc.next_allowed_at)})"
        )
    details = {
        "limit": exc.rule,
        "max_drips": exc.limit,
        "window_s": int(exc.window_s),
        "retry_after_s": exc.retry_after,
        "next_drip_at": iso(exc.next_allowed_at),
    }
    return code, message, details


def balance_refusal(balance: int, cap: int) -> str | None:
    if balance > cap:
        return (
            f"the recipient already holds {balance} plancks, more than this faucet's cap of"
            f" {cap}; the faucet funds accounts that are (nearly) empty"
        )
    return None


def is_in(ip: str, networks: Iterable[IpNetwork]) -> bool:
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return False
    return any(addr in net for net in networks)


def iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def span(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600 and seconds % 3600 == 0:
        n = seconds // 3600
        return f"{n} hour{'s' if n != 1 else ''}"
    if seconds >= 60 and seconds % 60 == 0:
        n = seconds // 60
        return f"{n} minute{'s' if n != 1 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"

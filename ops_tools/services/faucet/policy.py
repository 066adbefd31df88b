"""The faucet's limits as pure logic: which rules apply to a request, and what a refusal says.

The database enforces the counts atomically (``ledger``); this module decides which counters a
request touches, computes when the next drip is allowed from the times of earlier ones, and
words the refusal. Times are seconds since the epoch, passed in, so every rule is testable
without a clock.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Rule:
    """At most ``limit`` drips per ``window_s`` seconds for one value of ``scope``."""

    scope: str  # "recipient", "ip" or "global"
    limit: int
    window_s: int

    def describe(self) -> str:
        what = {"recipient": "per recipient", "ip": "per client IP", "global": "in total"}[
            self.scope
        ]
        plural = "s" if self.limit != 1 else ""
        return f"{self.limit} drip{plural} {what} per {_span(self.window_s)}"


@dataclass(frozen=True)
class Limits:
    recipient: Rule
    ip: Rule
    glob: Rule
    exempt_networks: tuple[IpNetwork, ...] = ()

    def rules_for(self, client_ip: str) -> list[Rule]:
        """The rules a request counts against; an exempt client skips only the IP rule."""
        rules = [self.recipient]
        if not is_in(client_ip, self.exempt_networks):
            rules.append(self.ip)
        rules.append(self.glob)
        return rules


@dataclass(frozen=True)
class Refusal:
    rule: Rule
    retry_after_s: int
    next_allowed_at: float

    @property
    def code(self) -> str:
        return f"{self.rule.scope}_limit"

    def message(self) -> str:
        return (
            f"limit reached: {self.rule.describe()}; the next drip is allowed in"
            f" {_span(self.retry_after_s)}"
        )


def check(rule: Rule, recent: Sequence[float], now: float) -> Refusal | None:
    """``recent``: times of the drips of this key within the window (any order).

    Refused when the window already holds ``limit`` drips; the next one is allowed when the
    oldest of the last ``limit`` leaves the window.
    """
    inside = sorted(t for t in recent if t > now - rule.window_s)
    if len(inside) < rule.limit:
        return None
    frees_at = inside[len(inside) - rule.limit] + rule.window_s
    return Refusal(rule, retry_after(frees_at, now), frees_at)


def first_refusal(
    checks: Iterable[tuple[Rule, Sequence[float]]], now: float
) -> Refusal | None:
    """The refusal with the longest wait: the one that really decides when to come back."""
    refusals = [r for rule, times in checks if (r := check(rule, times, now)) is not None]
    return max(refusals, key=lambda r: r.retry_after_s, default=None)


def retry_after(at: float, now: float) -> int:
    """Whole seconds, rounded up, at least 1: ``Retry-After`` must never invite an early retry."""
    return max(1, math.ceil(at - now))


def balance_refusal(balance: int, cap: int) -> str | None:
    if balance > cap:
        return f"the recipient already holds {balance} plancks, more than the cap of {cap}"
    return None


def is_in(ip: str, networks: Iterable[IpNetwork]) -> bool:
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return False
    return any(addr in net for net in networks)


def _span(seconds: float) -> str:
    seconds = int(seconds)
    if seconds % 3600 == 0 and seconds >= 3600:
        n = seconds // 3600
        return f"{n} hour{'s' if n != 1 else ''}"
    if seconds % 60 == 0 and seconds >= 60:
        n = seconds // 60
        return f"{n} minute{'s' if n != 1 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"

"""The limits as pure logic: which rules a request counts against, and the refusal's words."""

from __future__ import annotations

import ipaddress

from ops_tools.services.common.ratelimit import LimitExceeded
from ops_tools.services.faucet.config import LimitsConfig, WindowLimit
from ops_tools.services.faucet.policy import (
    balance_refusal,
    describe,
    refusal,
    rules_for,
    span,
)


def limits(*exempt: str) -> LimitsConfig:
    return LimitsConfig(
        recipient_window_s=86400,
        per_ip=WindowLimit(count=3, window_s=3600),
        global_per_hour=100,
        exempt_networks=[ipaddress.ip_network(n) for n in exempt],
    )


def test_a_request_counts_against_recipient_ip_and_global() -> None:
    rules = rules_for(limits(), "5Grw", "10.1.2.3")
    assert [(r.name, r.key, r.limit, r.window_s) for r in rules] == [
        ("recipient", "5Grw", 1, 86400),
        ("ip", "10.1.2.3", 3, 3600),
        ("global", "all", 100, 3600),
    ]


def test_exempt_networks_skip_only_the_ip_rule() -> None:
    lim = limits("127.0.0.0/8", "::1/128")
    assert [r.name for r in rules_for(lim, "5Grw", "127.0.0.1")] == ["recipient", "global"]
    assert [r.name for r in rules_for(lim, "5Grw", "::1")] == ["recipient", "global"]
    assert [r.name for r in rules_for(lim, "5Grw", "10.0.0.1")] == ["recipient", "ip", "global"]
    assert [r.name for r in rules_for(lim, "5Grw", "not-an-ip")] == ["recipient", "ip", "global"]


def test_refusal_names_the_limit_and_the_next_time() -> None:
    exc = LimitExceeded("ip", retry_after_s=1799.2, next_allowed_at=1_800_000_000.0,
                        limit=3, window_s=3600)
    code, message, details = refusal(exc)
    assert code == "ip_limit"
    assert "3 drips per client IP per 1 hour" in message
    assert "2027-01-15T08:00:00Z" in message
    assert details["retry_after_s"] == 1800  # rounded up, never early
    assert details["limit"] == "ip" and details["next_drip_at"] == "2027-01-15T08:00:00Z"


def test_switched_off_rule() -> None:
    code, message, _ = refusal(LimitExceeded("global", 3600, 0.0, 0, 3600))
    assert code == "global_limit" and "switched off" in message


def test_words() -> None:
    assert describe("recipient", 1, 86400) == "1 drip per recipient per 24 hours"
    assert span(90) == "90 seconds" and span(120) == "2 minutes" and span(1) == "1 second"


def test_balance_cap() -> None:
    assert balance_refusal(10, cap=10) is None
    message = balance_refusal(11, cap=10)
    assert message is not None and "11" in message and "10" in message

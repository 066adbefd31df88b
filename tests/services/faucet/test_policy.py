"""The limits as pure logic over a given clock."""

from __future__ import annotations

import ipaddress

from ops_tools.services.faucet.policy import (
    Limits,
    Rule,
    balance_refusal,
    check,
    first_refusal,
    retry_after,
)

HOUR = 3600
RECIPIENT = Rule("recipient", 1, 24 * HOUR)
IP = Rule("ip", 3, HOUR)
GLOBAL = Rule("global", 100, HOUR)


def limits(*exempt: str) -> Limits:
    return Limits(RECIPIENT, IP, GLOBAL, tuple(ipaddress.ip_network(n) for n in exempt))


def test_under_the_limit_passes() -> None:
    assert check(IP, [100.0, 200.0], now=300.0) is None


def test_at_the_limit_refuses_until_the_oldest_leaves_the_window() -> None:
    refusal = check(IP, [1000.0, 1500.0, 2000.0], now=2100.0)
    assert refusal is not None
    assert refusal.next_allowed_at == 1000.0 + HOUR
    assert refusal.retry_after_s == 1000 + HOUR - 2100
    assert refusal.code == "ip_limit"
    assert "3 drips per client IP per 1 hour" in refusal.message()


def test_drips_outside_the_window_do_not_count() -> None:
    assert check(IP, [0.0, 10.0, 20.0, 5000.0], now=HOUR + 30.0) is None


def test_the_longest_wait_decides() -> None:
    refusal = first_refusal([(IP, [0.0, 1.0, 2.0]), (RECIPIENT, [3.0])], now=10.0)
    assert refusal is not None and refusal.rule is RECIPIENT


def test_retry_after_is_whole_seconds_rounded_up_and_never_zero() -> None:
    assert retry_after(10.2, 10.0) == 1
    assert retry_after(12.01, 10.0) == 3
    assert retry_after(5.0, 10.0) == 1


def test_exempt_networks_skip_only_the_ip_rule() -> None:
    lim = limits("127.0.0.0/8", "::1/128")
    assert lim.rules_for("127.0.0.1") == [RECIPIENT, GLOBAL]
    assert lim.rules_for("::1") == [RECIPIENT, GLOBAL]
    assert lim.rules_for("10.1.2.3") == [RECIPIENT, IP, GLOBAL]
    assert limits().rules_for("127.0.0.1") == [RECIPIENT, IP, GLOBAL]


def test_balance_cap() -> None:
    assert balance_refusal(10, cap=10) is None
    message = balance_refusal(11, cap=10)
    assert message is not None and "11" in message and "10" in message

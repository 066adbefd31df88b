"""Storage on SQLite and on a real PostgreSQL: migrations and the rate limiter."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import MetaData, inspect, select

from ops_tools.services.common.db import Database
from ops_tools.services.common.migrations import migrate
from ops_tools.services.common.ratelimit import (
    LimitExceeded,
    RateLimiter,
    Rule,
    rate_events_table,
)

MIGRATIONS = Path(__file__).parent / "sample" / "migrations"
G1, G2 = "0x" + "11" * 32, "0x" + "22" * 32


def test_migrations_are_idempotent_and_concurrent(database_url: str) -> None:
    db = Database(database_url)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            migrate(db, MIGRATIONS, version_table="sample_alembic_version")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    migrate(db, MIGRATIONS, version_table="sample_alembic_version")
    tables = set(inspect(db.engine).get_table_names())
    assert {"sample_notes", "sample_alembic_version"} <= tables
    db.dispose()


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def limiter(database_url: str) -> RateLimiter:
    db = Database(database_url)
    table = rate_events_table(MetaData(), "demo")
    table.create(db.engine)
    return RateLimiter(db, table, b"s" * 32, clock=Clock())


def test_limits_windows_and_retry_after(limiter: RateLimiter) -> None:
    clock = limiter.clock
    assert isinstance(clock, Clock)
    rules = [Rule("recipient", "5Alice", 1, 3600), Rule("ip", "203.0.113.9", 3, 60)]
    limiter.reserve(rules, G1)
    with pytest.raises(LimitExceeded) as err:
        limiter.reserve(rules, G1)
    assert (err.value.rule, err.value.retry_after) == ("recipient", 3600)
    clock.now += 600
    with pytest.raises(LimitExceeded) as err:
        limiter.reserve(rules, G1)
    assert err.value.retry_after == 3000
    # Another genesis (a reset network) starts afresh; the old events stay.
    limiter.reserve(rules, G2)
    clock.now += 3000
    limiter.reserve(rules, G1)
    with limiter.db.session() as s:
        genesis = list(s.scalars(select(limiter.table.c.genesis)))
    assert genesis.count(G1) == 4 and genesis.count(G2) == 2


def test_ip_rule_counts_up_to_its_limit(limiter: RateLimiter) -> None:
    for n in range(3):
        limiter.reserve([Rule("recipient", f"acc{n}", 1, 60), Rule("ip", "1.2.3.4", 3, 60)], G1)
    with pytest.raises(LimitExceeded) as err:
        limiter.reserve([Rule("recipient", "acc9", 1, 60), Rule("ip", "1.2.3.4", 3, 60)], G1)
    assert err.value.rule == "ip"


def test_release_forgets_a_failed_request(limiter: RateLimiter) -> None:
    rule = [Rule("recipient", "5Bob", 1, 3600)]
    reservation = limiter.reserve(rule, G1)
    limiter.release(reservation)
    limiter.commit(limiter.reserve(rule, G1))
    with pytest.raises(LimitExceeded):
        limiter.reserve(rule, G1)


def test_keys_are_stored_hashed(limiter: RateLimiter) -> None:
    limiter.reserve([Rule("ip", "203.0.113.77", 5, 60)], G1)
    with limiter.db.session() as s:
        stored = list(s.scalars(select(limiter.table.c.key_hash)))
    assert stored and all("203.0.113.77" not in k for k in stored)


def test_concurrent_reservations_for_one_key_admit_exactly_one(limiter: RateLimiter) -> None:
    outcomes: list[str] = []
    barrier = threading.Barrier(20)

    def one() -> None:
        barrier.wait()
        try:
            limiter.reserve([Rule("recipient", "5Same", 1, 3600)], G1)
            outcomes.append("ok")
        except LimitExceeded:
            outcomes.append("refused")

    threads = [threading.Thread(target=one) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["ok"] + ["refused"] * 19


def test_limits_survive_a_new_limiter_on_the_same_database(limiter: RateLimiter) -> None:
    limiter.reserve([Rule("recipient", "5Carol", 1, 3600)], G1)
    again = RateLimiter(Database(str(limiter.db.url.render_as_string(hide_password=False))),
                        limiter.table, limiter.salt, clock=limiter.clock)
    with pytest.raises(LimitExceeded):
        again.reserve([Rule("recipient", "5Carol", 1, 3600)], G1)

"""A key filter (an account, either side, sender, recipient; the accounts an event names) is
an index lookup, never a walk of the whole list, on SQLite and on PostgreSQL: the database's own
plan of each page and count query is read (EXPLAIN) on an index of 40,000 transfers and 60,000
events, and the answers checked against the rows written.

Before, on SQLite, ``transfers(filter: {account})`` (an OR of sender and recipient) and
``events(filter: {account})`` (a correlated EXISTS) walked every row of the network, for the
page and for ``totalCount``, whatever the planner's statistics."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, func, insert, literal, select

from ops_tools.services.common.db import Database
from ops_tools.services.indexer import filters, queries
from ops_tools.services.indexer.schema import EventFilter, StringFilter, TransferFilter
from ops_tools.services.indexer.tables import (
    Base,
    EventAccountRow,
    EventRow,
    Network,
    TransferRow,
)

BLOCKS = 20_000
ACCOUNTS = [f"5acct{i}" for i in range(200)]
ALICE = "5alice"
CAP = 10_000


@pytest.fixture
def index(database_url: str) -> Iterator[tuple[Connection, dict]]:
    db = Database(database_url)
    Base.metadata.create_all(db.engine)
    rng = random.Random(33)
    transfers = [dict(network_id=1, block_number=b, event_idx=i, sender=ALICE,
                      recipient=rng.choice(ACCOUNTS), amount="1", extrinsic_idx=1,
                      extrinsic_hash="0x") for b in range(BLOCKS) for i in range(2)]
    named = [dict(network_id=1, block_number=b, event_idx=i, account=rng.choice(ACCOUNTS))
             for b in range(BLOCKS) for i in range(3)]
    with db.engine.begin() as c:
        c.execute(insert(Network), [dict(id=1, genesis_hash="0x01", active=True)])
        c.execute(insert(TransferRow), transfers)
        c.execute(insert(EventRow), [dict(network_id=1, block_number=b, idx=i, extrinsic_idx=1,
                                          phase="x", pallet="Balances", name="Transfer",
                                          args="{}") for b in range(BLOCKS) for i in range(3)])
        c.execute(insert(EventAccountRow), named)
        c.exec_driver_sql("ANALYZE")  # the planner with statistics, as a running index has
    try:
        with db.engine.connect() as conn:
            if conn.dialect.name == "postgresql":
                # 40,000 rows are a few pages, which PostgreSQL rightly reads whole; what the
                # test asks is whether an index path exists, which it takes on a large table.
                conn.exec_driver_sql("SET enable_seqscan = off")
            yield conn, {"transfers": transfers, "named": named}
    finally:
        db.engine.dispose()


def _plan(conn: Connection, stmt) -> str:  # noqa: ANN001 - a Select
    sql = str(stmt.compile(conn, compile_kwargs={"literal_binds": True}))
    if conn.dialect.name == "sqlite":
        return "\n".join(r[3] for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql))
    return "\n".join(r[0] for r in conn.exec_driver_sql("EXPLAIN " + sql))


def _whole_list_walks(conn: Connection, plan: str, table: str) -> bool:
    if conn.dialect.name == "sqlite":
        return any(line.startswith(f"SCAN {table}") or line.endswith(
            f"{table}_1 (network_id=?)") for line in plan.splitlines())
    return f"Seq Scan on {table}" in plan


def test_key_filters_are_index_lookups(index):
    conn, rows = index
    who = ACCOUNTS[7]
    cases = [
        ("transfers", "indexer_transfers", queries.transfers(
            conn, 1, 20, None, False, account=None, sender=None, recipient=None, low=None,
            high=None, where=filters.compile_filter(filters.TRANSFERS, TransferFilter(
                account=StringFilter(equal_to=who)))),
         [t for t in rows["transfers"] if who in (t["sender"], t["recipient"])]),
        ("transfers", "indexer_transfers", queries.transfers(
            conn, 1, 20, None, False, account=who, sender=None, recipient=None, low=None,
            high=None), [t for t in rows["transfers"] if who in (t["sender"], t["recipient"])]),
        ("transfers", "indexer_transfers", queries.transfers(
            conn, 1, 20, None, False, account=None, sender=None, recipient=None, low=None,
            high=None, where=filters.compile_filter(filters.TRANSFERS, TransferFilter(
                to=StringFilter(in_=[who, ACCOUNTS[8]])))),
         [t for t in rows["transfers"] if t["recipient"] in (who, ACCOUNTS[8])]),
        ("events", "indexer_events", queries.events(
            conn, 1, 20, None, False, pallet=None, name=None, account=None, low=None,
            high=None, where=filters.compile_filter(filters.EVENTS, EventFilter(
                account=StringFilter(equal_to=who)))),
         [e for e in rows["named"] if e["account"] == who]),
        ("events", "indexer_events", queries.events(
            conn, 1, 20, None, False, pallet=None, name=None, account=who, low=None,
            high=None), [e for e in rows["named"] if e["account"] == who]),
    ]
    for kind, table, page, expected in cases:
        count = select(func.count()).select_from(
            page.filtered.with_only_columns(literal(1)).limit(CAP + 1).subquery())
        paged = page.filtered.order_by(*([TransferRow.block_number, TransferRow.event_idx]
                                         if kind == "transfers"
                                         else [EventRow.block_number, EventRow.idx])).limit(21)
        for stmt in (count, paged):
            plan = _plan(conn, stmt)
            assert not _whole_list_walks(conn, plan, table), plan
        assert queries.count(conn, page.filtered, CAP) == (len(expected), False)
        first = sorted((r["block_number"], r["event_idx"]) for r in expected)[:20]
        assert page.keys == [list(k) for k in first]
        assert page.has_next is (len(expected) > 20)

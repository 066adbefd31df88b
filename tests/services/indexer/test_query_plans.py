"""The plans the databases choose for filtered pages and counts, on SQLite and on PostgreSQL:
every statement that the pages and the totalCount of a key filter run walks that filter's index
(EXPLAIN QUERY PLAN / EXPLAIN of the statements as executed), never the whole list; events by
account are read through the accounts' index, each event by its whole key.

The tables hold enough rows, with a few busy accounts and a rare one, for a planner to tell an
index range from a walk of the list; PostgreSQL has its statistics (ANALYZE), SQLite has none,
as in service (the indexer never runs ANALYZE). SQLite then takes an equality on ``network_id``
(every row) for a narrow range: an OR of the two account columns, a page ordered by a key the
account index did not end with, or an account checked event by event, walked the primary key
(0.5 s per count at 400,000 transfers for a rare account).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Connection, event, insert

from ops_tools.services.common.db import Database
from ops_tools.services.common.migrations import migrate
from ops_tools.services.indexer import filters, queries, store
from ops_tools.services.indexer.app import MIGRATIONS, VERSION_TABLE
from ops_tools.services.indexer.schema import (
    EventFilter,
    ExtrinsicFilter,
    HeartbeatFilter,
    IntFilter,
    StringFilter,
    TransferFilter,
)
from ops_tools.services.indexer.tables import (
    BlockRow,
    EventAccountRow,
    EventRow,
    ExtrinsicRow,
    HeartbeatRow,
    TransferRow,
)
from tests.conftest import free_port
from tests.services.postgres import PostgresServer

ROWS = 20_000
PER_BLOCK = 10
RARE = "rare-account"
BUSY = [f"busy-{i}" for i in range(5)]
CAP = 1_000


@pytest.fixture(scope="module",
                params=["sqlite", pytest.param("postgresql", marks=pytest.mark.process)])
def indexed(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Database, int]]:
    """One database of each kind for the module (the tests only read it)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('plans') / 'index.db'}"
    else:
        server: PostgresServer = request.getfixturevalue("postgres_server")
        url = server.create_database(f"plans_{free_port()}")
    db = Database(url)
    migrate(db, MIGRATIONS, version_table=VERSION_TABLE)
    blocks = ROWS // PER_BLOCK
    with db.session(write=True) as s:
        c = s.connection()
        net = store.ensure_network(c, "0x" + "ab" * 32, "plans").id
        c.execute(insert(BlockRow), [
            {"network_id": net, "number": n, "hash": f"0x{n:064x}", "parent_hash": "0x0",
             "spec_version": 1, "extrinsic_count": PER_BLOCK, "event_count": PER_BLOCK,
             "timestamp": 1_000_000 + 6_000 * n} for n in range(blocks)])
        # The rare account sends and receives a handful, one of them to itself.
        rare = {i * 3_001: (RARE, BUSY[0]) for i in range(3)} | {
            i * 4_999: (BUSY[1], RARE) for i in range(1, 4)} | {7_777: (RARE, RARE)}
        c.execute(insert(TransferRow), [
            {"network_id": net, "block_number": i // PER_BLOCK, "event_idx": i % PER_BLOCK,
             "extrinsic_idx": i % PER_BLOCK, "extrinsic_hash": None,
             "sender": rare.get(i, (BUSY[i % 5], None))[0],
             "recipient": rare.get(i, (None, f"dest-{i % 50}"))[1], "amount": "1"}
            for i in range(ROWS)])
        c.execute(insert(HeartbeatRow), [
            {"network_id": net, "block_number": i // PER_BLOCK, "event_idx": i % PER_BLOCK,
             "extrinsic_hash": None, "account": RARE if i % 4_000 == 7 else BUSY[i % 5],
             "epoch": i // 100} for i in range(ROWS)])
        c.execute(insert(ExtrinsicRow), [
            {"network_id": net, "block_number": i // PER_BLOCK, "idx": i % PER_BLOCK,
             "hash": f"0x{i:064x}", "signer": RARE if i % 4_000 == 7 else BUSY[i % 5],
             "pallet": "Balances", "call": "transfer_keep_alive", "args": "{}",
             "success": True, "fee": "1", "error": None} for i in range(ROWS)])
        c.execute(insert(EventRow), [
            {"network_id": net, "block_number": i // PER_BLOCK, "idx": i % PER_BLOCK,
             "extrinsic_idx": i % PER_BLOCK, "phase": "ApplyExtrinsic",
             "pallet": "Balances" if i % 2 else "System", "name": "Transfer", "args": "{}"}
            for i in range(ROWS)])
        # Each event names a busy account; seven name the rare one too, two of them twice.
        c.execute(insert(EventAccountRow), [
            {"network_id": net, "account": account, "block_number": i // PER_BLOCK,
             "event_idx": i % PER_BLOCK}
            for i in range(ROWS) for account in (
                [BUSY[i % 5]] + ([RARE, "other"] if i % 2_857 == 11 else []))])
    if db.engine.dialect.name == "postgresql":
        with db.engine.connect() as c:
            c.exec_driver_sql("ANALYZE")
            c.commit()
    try:
        yield db, net
    finally:
        db.dispose()


def _statements(conn: Connection, run: Callable[[], Any]) -> list[tuple[str, Any]]:
    seen: list[tuple[str, Any]] = []

    def capture(_c: Any, _cursor: Any, statement: str, parameters: Any, *_rest: Any) -> None:
        if not statement.startswith("SET "):  # the planner's settings (queries._index_walks)
            seen.append((statement, parameters))

    event.listen(conn, "before_cursor_execute", capture)
    try:
        run()
    finally:
        event.remove(conn, "before_cursor_execute", capture)
    return seen


def _plan(conn: Connection, statement: str, parameters: Any) -> list[str]:
    if conn.dialect.name == "sqlite":
        return [r[3] for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement,
                                                   parameters)]
    return [r[0] for r in conn.exec_driver_sql("EXPLAIN " + statement, parameters)]


def _assert_served(conn: Connection, what: str, run: Callable[[], Any],
                   indexes: set[str], lookups: frozenset[str] = frozenset()) -> None:
    """Every statement ``run`` executes walks only ``indexes``, each of them used by some
    statement, and reads ``lookups`` (primary keys) only by a row's whole key."""
    statements = _statements(conn, run)
    assert statements, what
    used: set[str] = set()
    for statement, parameters in statements:
        plan = _plan(conn, statement, parameters)
        text = "\n".join(plan)
        context = f"{what}: {statement}\n{text}"
        if conn.dialect.name == "sqlite":
            for line in plan:
                assert not re.match(r"SCAN indexer_", line), f"a table scan in {context}"
                search = re.match(r"SEARCH (indexer_\w+) USING (?:COVERING )?INDEX (\w+)", line)
                if search and search[2] in lookups:
                    assert "block_number=?" in line, f"{search[2]} walked in {context}"
                elif search:
                    assert search[2] in indexes, f"{search[2]} walked in {context}"
                    used.add(search[2])
                else:
                    assert "indexer_" not in line, f"unexpected access in {context}"
        else:
            assert "Seq Scan" not in text, f"a sequential scan in {context}"
            for i, line in enumerate(plan):
                node = re.search(r"(?:Index Scan|Index Only Scan) (?:Backward )?using (\w+)"
                                 r"|Bitmap Index Scan on (\w+)", line)
                if not node:
                    continue
                index = node[1] or node[2]
                if index in lookups:
                    cond = next((x for x in plan[i + 1:] if "Index Cond" in x), "")
                    assert "block_number =" in cond, f"{index} walked in {context}"
                else:
                    assert index in indexes, f"{index} walked in {context}"
                    used.add(index)
    assert used == indexes, f"{what}: walked {used}, expected {indexes}"


def _eq(value: str) -> StringFilter:
    return StringFilter(equal_to=value)


TRANSFERS = [
    ("from", TransferFilter(from_=_eq(RARE)), {"ix_indexer_transfers_sender"}, 4),
    ("to", TransferFilter(to=_eq(RARE)), {"ix_indexer_transfers_recipient"}, 4),
    ("account (either side)", TransferFilter(account=_eq(RARE)),
     {"ix_indexer_transfers_sender", "ix_indexer_transfers_recipient"}, 7),
    ("account and a block range", TransferFilter(
        account=_eq(RARE), block_number=IntFilter(greater_than_or_equal_to=500)),
     {"ix_indexer_transfers_sender", "ix_indexer_transfers_recipient"}, 4),
    ("to, in", TransferFilter(to=StringFilter(in_=[RARE, "nobody"])),
     {"ix_indexer_transfers_recipient"}, 4),
]


@pytest.mark.parametrize("desc", [False, True], ids=["asc", "desc"])
@pytest.mark.parametrize(("what", "value", "indexes", "expected"), TRANSFERS,
                         ids=[t[0] for t in TRANSFERS])
def test_transfer_pages_and_counts_walk_the_account_indexes(indexed, what, value, indexes,
                                                            expected, desc):
    db, net = indexed
    where = filters.compile_branches(filters.TRANSFERS, value)
    with db.engine.connect() as c:
        def page(after: str | None = None) -> queries.Page:
            return queries.transfers(c, net, 2, after, desc, account=None, sender=None,
                                     recipient=None, low=None, high=None, where=where)

        first = page()
        _assert_served(c, f"transfers({what}) page", page, indexes)
        _assert_served(c, f"transfers({what}) next page",
                       lambda: page(queries.encode_cursor("transfer", first.keys[-1])), indexes)
        _assert_served(c, f"transfers({what}).totalCount",
                       lambda: queries.count(c, first, CAP), indexes)
        # What the plans serve is the right answer: every page, and the count, exact.
        keys, after = [], None
        while True:
            got = page(after)
            keys += got.keys
            if not got.has_next:
                break
            after = queries.encode_cursor("transfer", got.keys[-1])
        assert len(keys) == len({tuple(k) for k in keys}) == expected
        assert keys == sorted(keys, reverse=desc)
        assert queries.count(c, first, CAP) == (expected, False)


def test_the_legacy_account_argument_walks_both_account_indexes(indexed):
    db, net = indexed
    with db.engine.connect() as c:
        def page() -> queries.Page:
            return queries.transfers(c, net, 50, None, False, account=RARE, sender=None,
                                     recipient=None, low=None, high=None)

        both = {"ix_indexer_transfers_sender", "ix_indexer_transfers_recipient"}
        _assert_served(c, "transfers(account:) page", page, both)
        got = page()
        _assert_served(c, "transfers(account:).totalCount", lambda: queries.count(c, got, CAP),
                       both)
        assert queries.count(c, got, CAP) == (7, False) and len(got.rows) == 7


def test_a_busy_accounts_count_stops_at_the_cap_on_its_indexes(indexed):
    """A count of many branches (an ``in`` of 100 accounts, either side: 200 index ranges)
    reads them one after the other and stops once past the cap: a busy account's range is the
    only one read, not 200 ranges of up to the cap each."""
    db, net = indexed
    accounts = BUSY[2:3] + [f"nobody-{i}" for i in range(99)]
    where = filters.compile_branches(filters.TRANSFERS, TransferFilter(
        account=StringFilter(in_=accounts)))
    assert len(where) == 200
    with db.engine.connect() as c:
        got = queries.transfers(c, net, 50, None, False, account=None, sender=None,
                                recipient=None, low=None, high=None, where=where)
        assert len(got.rows) == 50 and got.has_next
        _assert_served(c, "transfers(busy account).totalCount",
                       lambda: queries.count(c, got, CAP), {"ix_indexer_transfers_sender"})
        assert len(_statements(c, lambda: queries.count(c, got, CAP))) == 1
        assert queries.count(c, got, CAP) == (CAP, True)


@pytest.mark.parametrize("desc", [False, True], ids=["asc", "desc"])
def test_heartbeat_and_extrinsic_pages_and_counts_walk_the_account_index(indexed, desc):
    db, net = indexed
    lists = [
        ("heartbeats(account)", "heartbeat", lambda c, after: queries.heartbeats(
            c, net, 2, after, desc, account=None, low=None, high=None,
            where=filters.compile_filter(filters.HEARTBEATS,
                                         HeartbeatFilter(account=_eq(RARE)))),
         "ix_indexer_heartbeats_account"),
        ("extrinsics(signer)", "extrinsic", lambda c, after: queries.extrinsics(
            c, net, 2, after, desc, pallet=None, call=None, account=None, success=None,
            low=None, high=None, where=filters.compile_filter(
                filters.EXTRINSICS, ExtrinsicFilter(signer=_eq(RARE)))),
         "ix_indexer_extrinsics_signer"),
    ]
    with db.engine.connect() as c:
        for what, kind, read, index in lists:
            first = read(c, None)
            _assert_served(c, f"{what} page", lambda r=read: r(c, None), {index})
            _assert_served(c, f"{what} next page", lambda r=read, k=kind, f=first: r(
                c, queries.encode_cursor(k, f.keys[-1])), {index})
            _assert_served(c, f"{what}.totalCount", lambda f=first: queries.count(c, f, CAP),
                           {index})
            assert queries.count(c, first, CAP) == (5, False)


def _primary_key(conn: Connection, table: str) -> str:
    if conn.dialect.name == "sqlite":
        return f"sqlite_autoindex_{table}_1"
    return f"{table}_pkey"


EVENTS = [
    ("account", EventFilter(account=_eq(RARE)), 7),
    ("account, in", EventFilter(account=StringFilter(in_=[RARE, "other"])), 7),
    ("account and pallet", EventFilter(account=_eq(RARE), pallet=_eq("Balances")), 4),
    ("account and a block range", EventFilter(
        account=_eq(RARE), block_number=IntFilter(less_than=1_000)), 4),
]


@pytest.mark.parametrize("desc", [False, True], ids=["asc", "desc"])
@pytest.mark.parametrize(("what", "value", "expected"), EVENTS, ids=[e[0] for e in EVENTS])
def test_event_pages_and_counts_by_account_walk_the_accounts_index(indexed, what, value,
                                                                   expected, desc):
    """Through the accounts' index, each event read by its key: not every event of the
    network checked for the account."""
    db, net = indexed
    where = filters.compile_branches(filters.EVENTS, value)
    joined = filters.drives(filters.EVENTS, value)
    with db.engine.connect() as c:
        accounts = {_primary_key(c, "indexer_event_accounts")}
        lookups = frozenset({_primary_key(c, "indexer_events")})

        def page(after: str | None = None) -> queries.Page:
            return queries.events(c, net, 2, after, desc, pallet=None, name=None,
                                  account=None, low=None, high=None, where=where,
                                  joined=joined)

        first = page()
        _assert_served(c, f"events({what}) page", page, accounts, lookups)
        _assert_served(c, f"events({what}) next page",
                       lambda: page(queries.encode_cursor("event", first.keys[-1])), accounts,
                       lookups)
        _assert_served(c, f"events({what}).totalCount",
                       lambda: queries.count(c, first, CAP), accounts, lookups)
        keys, after = [], None
        while True:
            got = page(after)
            keys += got.keys
            if not got.has_next:
                break
            after = queries.encode_cursor("event", got.keys[-1])
        assert len(keys) == len({tuple(k) for k in keys}) == expected
        assert keys == sorted(keys, reverse=desc)
        assert queries.count(c, first, CAP) == (expected, False)
        # The legacy argument reads the same way, and combines with the filter's account.
        _assert_served(c, "events(account:) page", lambda: queries.events(
            c, net, 50, None, desc, pallet=None, name=None, account=RARE, low=None,
            high=None), accounts, lookups)
        both = queries.events(c, net, 50, None, desc, pallet=None, name=None, account=RARE,
                              low=None, high=None, where=where, joined=joined)
        assert both.keys == keys

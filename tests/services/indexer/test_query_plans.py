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
from sqlalchemy import Connection, event, insert, select

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
    branches = filters.branches(filters.EVENTS, value)
    where, joined = [b.where for b in branches], [b.joined for b in branches]
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


def _holds(ops: Any, value: Any) -> bool:
    checks = {"equal_to": lambda x: value == x, "in_": lambda x: value in x,
              "greater_than": lambda x: value is not None and value > x,
              "greater_than_or_equal_to": lambda x: value is not None and value >= x,
              "less_than": lambda x: value is not None and value < x,
              "less_than_or_equal_to": lambda x: value is not None and value <= x}
    return all(check(getattr(ops, name)) for name, check in checks.items()
               if getattr(ops, name, None) is not None)


def _matches(spec: dict, value: Any, row: Any, named: dict) -> bool:
    """``value`` over one row, by the filter's meaning (not its SQL): every field and ``and``
    member, and one ``or`` member; an event's ``account`` is any account it names."""
    for attr, f in spec.items():
        ops = getattr(value, attr, None)
        if ops is None:
            continue
        if f.drive:
            candidates = named.get((row.block_number, row.idx), [])
        else:
            candidates = [getattr(row, c.key) for c in f.columns]
        if not any(_holds(ops, v) for v in candidates):
            return False
    if value.and_ and not all(_matches(spec, c, row, named) for c in value.and_):
        return False
    return not value.or_ or any(_matches(spec, c, row, named) for c in value.or_)


def _s(**ops: Any) -> StringFilter:
    return StringFilter(**ops)


ACCOUNT_INDEXES = {"ix_indexer_transfers_sender", "ix_indexer_transfers_recipient"}
#: Accounts at any depth of and/or, each served by the account indexes. (list, what, filter,
#: the indexes walked: None for the event accounts' primary key with events read by key).
NESTED = [
    ("transfers", "or of account and to", TransferFilter(or_=[
        TransferFilter(account=_eq(RARE)), TransferFilter(to=_eq("nobody"))]), ACCOUNT_INDEXES),
    ("transfers", "account in, nested in and/or beside a block range", TransferFilter(
        block_number=IntFilter(greater_than_or_equal_to=400), and_=[TransferFilter(or_=[
            TransferFilter(account=_s(in_=[RARE, "nobody"])),
            TransferFilter(from_=_eq("nobody-2"))])]), ACCOUNT_INDEXES),
    ("transfers", "two accounts that must both hold", TransferFilter(and_=[
        TransferFilter(account=_eq(RARE)), TransferFilter(account=_eq(BUSY[0]))]),
     ACCOUNT_INDEXES),
    ("transfers", "to, three deep", TransferFilter(or_=[
        TransferFilter(and_=[TransferFilter(or_=[TransferFilter(to=_eq(RARE))])]),
        TransferFilter(from_=_eq(RARE), block_number=IntFilter(less_than=700))]),
     ACCOUNT_INDEXES),
    ("events", "or of accounts", EventFilter(or_=[
        EventFilter(account=_eq(RARE)), EventFilter(account=_eq("other"))]), None),
    ("events", "account beside an or of pallets", EventFilter(
        and_=[EventFilter(account=_eq(RARE))],
        or_=[EventFilter(pallet=_eq("Balances")), EventFilter(pallet=_eq("System"))]), None),
    ("events", "two accounts that must both hold", EventFilter(or_=[EventFilter(and_=[
        EventFilter(account=_eq(RARE)), EventFilter(account=_eq("other"))])]), None),
    ("heartbeats", "or of accounts, one with an epoch", HeartbeatFilter(or_=[
        HeartbeatFilter(account=_eq(RARE)), HeartbeatFilter(and_=[
            HeartbeatFilter(account=_eq("nobody")),
            HeartbeatFilter(epoch=IntFilter(greater_than=1))])]),
     {"ix_indexer_heartbeats_account"}),
    ("extrinsics", "or of signers", ExtrinsicFilter(or_=[
        ExtrinsicFilter(signer=_eq(RARE)), ExtrinsicFilter(signer=_s(in_=["nobody", RARE]))]),
     {"ix_indexer_extrinsics_signer"}),
]
LISTS = {
    "transfers": (filters.TRANSFERS, TransferRow, "transfer"),
    "events": (filters.EVENTS, EventRow, "event"),
    "heartbeats": (filters.HEARTBEATS, HeartbeatRow, "heartbeat"),
    "extrinsics": (filters.EXTRINSICS, ExtrinsicRow, "extrinsic"),
}


def _read(c: Connection, net: int, name: str, value: Any, desc: bool,
          after: str | None) -> queries.Page:
    spec = LISTS[name][0]
    branches = filters.branches(spec, value)
    where = [b.where for b in branches]
    if name == "transfers":
        return queries.transfers(c, net, 2, after, desc, account=None, sender=None,
                                 recipient=None, low=None, high=None, where=where)
    if name == "events":
        return queries.events(c, net, 2, after, desc, pallet=None, name=None, account=None,
                              low=None, high=None, where=where,
                              joined=[b.joined for b in branches])
    if name == "heartbeats":
        return queries.heartbeats(c, net, 2, after, desc, account=None, low=None, high=None,
                                  where=where)
    return queries.extrinsics(c, net, 2, after, desc, pallet=None, call=None, account=None,
                              success=None, low=None, high=None, where=where)


@pytest.mark.parametrize("desc", [False, True], ids=["asc", "desc"])
@pytest.mark.parametrize(("name", "what", "value", "indexes"), NESTED,
                         ids=[f"{n[0]}: {n[1]}" for n in NESTED])
def test_accounts_nested_in_and_or_walk_the_account_indexes(indexed, name, what, value,
                                                             indexes, desc):
    """Each conjunction of the filter's and/or tree is its own index range: the pages (both
    orders, after a cursor) and the count walk only the account indexes, and what they return
    is what the filter means, checked row by row over the whole table."""
    db, net = indexed
    spec, table, kind = LISTS[name]
    with db.engine.connect() as c:
        lookups: frozenset[str] = frozenset()
        if indexes is None:
            indexes = {_primary_key(c, "indexer_event_accounts")}
            lookups = frozenset({_primary_key(c, "indexer_events")})
        first = _read(c, net, name, value, desc, None)
        _assert_served(c, f"{name}({what}) page",
                       lambda: _read(c, net, name, value, desc, None), indexes, lookups)
        if first.keys:
            _assert_served(c, f"{name}({what}) next page", lambda: _read(
                c, net, name, value, desc, queries.encode_cursor(kind, first.keys[-1])),
                indexes, lookups)
        _assert_served(c, f"{name}({what}).totalCount", lambda: queries.count(c, first, CAP),
                       indexes, lookups)
        keys, after = [], None
        while True:
            got = _read(c, net, name, value, desc, after)
            keys += [tuple(k) for k in got.keys]
            if not got.has_next:
                break
            after = queries.encode_cursor(kind, got.keys[-1])
        named: dict[tuple[int, int], list[str]] = {}
        for r in c.execute(select(EventAccountRow).where(EventAccountRow.network_id == net)):
            named.setdefault((r.block_number, r.event_idx), []).append(r.account)
        sort_key = [table.block_number, getattr(table, "event_idx", None) or table.idx]
        brute = sorted(((r.block_number, getattr(r, sort_key[1].key))
                        for r in c.execute(select(table).where(table.network_id == net))
                        if _matches(spec, value, r, named)), reverse=desc)
        assert brute, f"{name}({what}) matches nothing: a vacuous check"
        assert keys == brute
        assert queries.count(c, first, CAP) == (len(brute), False)


def test_a_filter_past_the_branch_bound_is_refused_naming_where():
    """Every or member times the ors beside it, each value of a key's in, both sides of an
    account: past MAX_BRANCHES the filter is refused with the place it overflowed, never read
    as one condition the planner may serve by a walk of the whole list."""
    many = [f"a{i}" for i in range(100)]
    assert len(filters.branches(filters.TRANSFERS, TransferFilter(
        account=StringFilter(in_=many)))) == filters.MAX_BRANCHES
    cases = [
        (TransferFilter(account=StringFilter(in_=many), block_number=IntFilter(
            greater_than=1), or_=[TransferFilter(to=_eq("x")), TransferFilter(to=_eq("y"))]),
         r"^filter: the filter expands to 201 or more index branches, at most 200"),
        (TransferFilter(and_=[
            TransferFilter(or_=[TransferFilter(to=_eq(f"t{i}")) for i in range(15)]),
            TransferFilter(or_=[TransferFilter(from_=_eq(f"f{i}")) for i in range(15)])]),
         r"^filter\.and\[1\]: the filter expands to 225 or more index branches"),
        (TransferFilter(account=StringFilter(in_=many),
                        and_=[TransferFilter(account=_eq("x"))]),
         r"^filter\.account\.in: the filter expands to 400 or more"),
        (EventFilter(or_=[EventFilter(pallet=_eq(p)) for p in "PQR"],
                     account=StringFilter(in_=many)),
         r"^filter: the filter expands to 201 or more"),
    ]
    for value, message in cases:
        spec = filters.TRANSFERS if isinstance(value, TransferFilter) else filters.EVENTS
        with pytest.raises(filters.TooManyBranches, match=message):
            filters.branches(spec, value)
        with pytest.raises(filters.TooManyBranches, match=message):
            filters.count_branches(spec, value)
    # Repeated members are one branch: an or cannot be padded into many reads of one range.
    same = TransferFilter(or_=[TransferFilter(to=_eq(RARE))] * 30)
    assert len(filters.branches(filters.TRANSFERS, same)) == 1

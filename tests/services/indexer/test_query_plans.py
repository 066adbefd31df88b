"""The plans the databases choose for filtered pages and counts, on SQLite and on PostgreSQL:
every statement that the pages and the totalCount of a key filter run walks that filter's index
(EXPLAIN QUERY PLAN / EXPLAIN of the statements as executed), never the whole list, in the
list's order (no sort of a table's rows); events by account are read through the accounts'
index, each event by its whole key; a pallet (with a name or call) walks the pallet indexes.

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
    BooleanFilter,
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
from tests.services.indexer.harness import Api
from tests.services.postgres import PostgresServer

# Plans, not times (the query timeout's test only needs a walk longer than 0.1 ms): make test
# runs these beside the workers at the lowest priority (scripts/test-lanes).
pytestmark = pytest.mark.idle

ROWS = 20_000
PER_BLOCK = 10
RARE = "rare-account"
BUSY = [f"busy-{i}" for i in range(5)]
CAP = 1_000


RARE_PALLET = "Sudo"


def _event_name(i: int) -> tuple[str, str]:
    """Half the events are a busy pallet's, of two busy names (half of it each) and a rare
    one; a rare pallet has a handful (none of them name the rare account)."""
    if i % 5_000 == 3:
        return RARE_PALLET, "Sudid"
    if not i % 2:
        return "System", "ExtrinsicSuccess"
    if i % 3_000 == 1:
        return "Balances", "Slashed"
    return "Balances", "Transfer" if i % 4 == 1 else "Withdraw"


def _extrinsic_call(i: int) -> tuple[str, str]:
    if i % 5_000 == 3:
        return RARE_PALLET, "sudo"
    if not i % 3:
        return "System", "remark"
    if i % 3_001 == 2:
        return "Balances", "force_transfer"
    return "Balances", "transfer_keep_alive" if i % 2 else "transfer_allow_death"


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
             "pallet": _extrinsic_call(i)[0], "call": _extrinsic_call(i)[1], "args": "{}",
             "success": True, "fee": "1", "error": None} for i in range(ROWS)])
        c.execute(insert(EventRow), [
            {"network_id": net, "block_number": i // PER_BLOCK, "idx": i % PER_BLOCK,
             "extrinsic_idx": i % PER_BLOCK, "phase": "ApplyExtrinsic",
             "pallet": _event_name(i)[0], "name": _event_name(i)[1], "args": "{}"}
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


def _unbounded_sorts(conn: Connection, statement: str, parameters: Any) -> list[str]:
    """The sorts of rows read from a table, not from walks that a LIMIT bounds: a sort of a
    union of branches, each walked up to the page, is the merge (queries.paginate); a sort
    right over a table's rows reads every row its condition matches (a busy pallet's)."""
    if conn.dialect.name == "sqlite":
        rows = list(conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters))
        return [r[3] for r in rows if "TEMP B-TREE FOR" in r[3] and "ORDER BY" in r[3]
                and any(re.match(r"(SEARCH|SCAN) indexer_", s[3])
                        for s in rows if s[1] == r[1])]
    [[root]] = conn.exec_driver_sql("EXPLAIN (FORMAT JSON) " + statement, parameters).one()
    found: list[str] = []

    def limited(node: dict[str, Any]) -> bool:
        return any(c["Node Type"] == "Limit" or limited(c) for c in node.get("Plans", []))

    def walk(node: dict[str, Any]) -> None:
        if node["Node Type"] in ("Sort", "Incremental Sort") and not limited(node):
            found.append(f"{node['Node Type']} by {node.get('Sort Key')}")
        for child in node.get("Plans", []):
            walk(child)

    walk(root["Plan"])
    return found


def _assert_served(conn: Connection, what: str, run: Callable[[], Any],
                   indexes: set[str], lookups: frozenset[str] = frozenset()) -> None:
    """Every statement ``run`` executes walks only ``indexes``, each of them used by some
    statement, reads ``lookups`` (primary keys) only by a row's whole key, and sorts no
    table's rows (each walk is in the list's order, see _unbounded_sorts)."""
    statements = _statements(conn, run)
    assert statements, what
    used: set[str] = set()
    for statement, parameters in statements:
        plan = _plan(conn, statement, parameters)
        text = "\n".join(plan)
        context = f"{what}: {statement}\n{text}"
        assert not _unbounded_sorts(conn, statement, parameters), f"a sort in {context}"
        if conn.dialect.name == "sqlite":
            for line in plan:
                assert not re.match(r"SCAN indexer_", line), f"a table scan in {context}"
                search = re.match(r"SEARCH (indexer_\w+) USING (?:COVERING )?INDEX (\w+)", line)
                if search and search[2] in lookups and "block_number=? AND idx=?" in line:
                    pass  # one row, by its whole key
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
                cond = next((x for x in plan[i + 1:] if "Index Cond" in x), "")
                if index in lookups and "block_number =" in cond and "(idx =" in cond:
                    pass  # one row, by its whole key
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


def _event_lookups(conn: Connection) -> frozenset[str]:
    """The indexes that hold an event's whole key, any of which reads one event by it (the
    pallet indexes end with it)."""
    return frozenset({_primary_key(conn, "indexer_events"), "ix_indexer_events_pallet",
                      "ix_indexer_events_name"})


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
        lookups = _event_lookups(c)

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
            lookups = _event_lookups(c)
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


EVENT_PALLET = {"ix_indexer_events_pallet"}
EVENT_NAME = {"ix_indexer_events_name"}
#: Pallets (with an event's name, an extrinsic's call) alone, beside a block range, in an or
#: with an account: (list, what, filter, the indexes walked, with the event accounts' primary
#: key where the events named ACCOUNTS are read through it).
ACCOUNTS = "accounts"
PALLETS = [
    ("events", "pallet", EventFilter(pallet=_eq("Balances")), EVENT_PALLET),
    ("events", "rare pallet", EventFilter(pallet=_eq(RARE_PALLET)), EVENT_PALLET),
    ("events", "pallet, in", EventFilter(pallet=_s(in_=[RARE_PALLET, "Nobody"])),
     EVENT_PALLET),
    ("events", "pallet and a block range", EventFilter(
        pallet=_eq("Balances"), block_number=IntFilter(greater_than_or_equal_to=1_500)),
     EVENT_PALLET),
    ("events", "pallet and name", EventFilter(pallet=_eq("Balances"), name=_eq("Slashed")),
     EVENT_NAME),
    ("events", "pallet and names, in", EventFilter(
        pallet=_eq("Balances"), name=_s(in_=["Slashed", "Nobody", "Transfer"])), EVENT_NAME),
    ("events", "pallets, in, and names, in", EventFilter(
        pallet=_s(in_=["Balances", RARE_PALLET]), name=_s(in_=["Slashed", "Sudid"])),
     EVENT_NAME),
    ("events", "pallet and a busy name", EventFilter(
        pallet=_eq("Balances"), name=_eq("Transfer")), EVENT_NAME),
    ("events", "or of account and pallet", EventFilter(or_=[
        EventFilter(account=_eq(RARE)), EventFilter(pallet=_eq("Balances"))]),
     EVENT_PALLET | {ACCOUNTS}),
    ("events", "or of account and a rare pallet", EventFilter(or_=[
        EventFilter(account=_eq(RARE)), EventFilter(pallet=_eq(RARE_PALLET))]),
     EVENT_PALLET | {ACCOUNTS}),
    ("events", "or of account and pallet with name", EventFilter(or_=[
        EventFilter(account=_eq(RARE)), EventFilter(and_=[
            EventFilter(pallet=_eq("Balances")), EventFilter(name=_eq("Slashed"))])]),
     EVENT_NAME | {ACCOUNTS}),
    ("extrinsics", "pallet", ExtrinsicFilter(pallet=_eq("Balances")),
     {"ix_indexer_extrinsics_pallet"}),
    ("extrinsics", "rare pallet", ExtrinsicFilter(pallet=_eq(RARE_PALLET)),
     {"ix_indexer_extrinsics_pallet"}),
    ("extrinsics", "pallet and call", ExtrinsicFilter(
        pallet=_eq("Balances"), call=_eq("force_transfer")), {"ix_indexer_extrinsics_call"}),
    ("extrinsics", "pallet and calls, in", ExtrinsicFilter(
        pallet=_eq("Balances"), call=_s(in_=["force_transfer", "sudo"])),
     {"ix_indexer_extrinsics_call"}),
    ("extrinsics", "pallet and a busy call", ExtrinsicFilter(
        pallet=_eq("Balances"), call=_eq("transfer_keep_alive")),
     {"ix_indexer_extrinsics_call"}),
    ("extrinsics", "or of signer and pallet", ExtrinsicFilter(or_=[
        ExtrinsicFilter(signer=_eq(RARE)), ExtrinsicFilter(pallet=_eq("System"))]),
     {"ix_indexer_extrinsics_signer", "ix_indexer_extrinsics_pallet"}),
]
#: Pages read of a busy pallet's list (each checked against the brute-force answer's start).
PAGES = 12


@pytest.mark.parametrize("desc", [False, True], ids=["asc", "desc"])
@pytest.mark.parametrize(("name", "what", "value", "indexes"), PALLETS,
                         ids=[f"{p[0]}: {p[1]}" for p in PALLETS])
def test_pallet_pages_and_counts_walk_the_pallet_indexes_in_order(indexed, name, what, value,
                                                                  indexes, desc):
    """A pallet alone, or with an event's name or an extrinsic's call, is an ordered walk of
    an index that ends with the list's sort key, in both orders and after a cursor: no sort of
    the pallet's rows (a busy pallet's are half the list), no walk of the primary key checking
    each row's pallet (a rare pallet's few rows are anywhere in it); its count stops at the
    cap. What the pages return is what the filter means, checked against every row."""
    db, net = indexed
    spec, table, kind = LISTS[name]
    with db.engine.connect() as c:
        lookups: frozenset[str] = frozenset()
        if ACCOUNTS in indexes:
            indexes = indexes - {ACCOUNTS} | {_primary_key(c, "indexer_event_accounts")}
            lookups = _event_lookups(c)
        first = _read(c, net, name, value, desc, None)
        _assert_served(c, f"{name}({what}) page",
                       lambda: _read(c, net, name, value, desc, None), indexes, lookups)
        _assert_served(c, f"{name}({what}) next page", lambda: _read(
            c, net, name, value, desc, queries.encode_cursor(kind, first.keys[-1])),
            indexes, lookups)
        _assert_served(c, f"{name}({what}).totalCount", lambda: queries.count(c, first, CAP),
                       indexes, lookups)
        keys, after = [], None
        for _ in range(PAGES):
            got = _read(c, net, name, value, desc, after)
            keys += [tuple(k) for k in got.keys]
            if not got.has_next:
                break
            after = queries.encode_cursor(kind, got.keys[-1])
        named: dict[tuple[int, int], list[str]] = {}
        for r in c.execute(select(EventAccountRow).where(EventAccountRow.network_id == net)):
            named.setdefault((r.block_number, r.event_idx), []).append(r.account)
        brute = sorted(((r.block_number, r.idx)
                        for r in c.execute(select(table).where(table.network_id == net))
                        if _matches(spec, value, r, named)), reverse=desc)
        assert brute, f"{name}({what}) matches nothing: a vacuous check"
        assert keys == brute[:len(keys)]
        assert len(keys) == min(len(brute), 2 * PAGES)
        assert queries.count(c, first, CAP) == (min(len(brute), CAP), len(brute) > CAP)


def test_the_legacy_pallet_arguments_walk_the_pallet_indexes(indexed):
    """``events(pallet:, name:)`` and ``extrinsics(pallet:, call:)``, the older arguments,
    read the same indexes as the filter."""
    db, net = indexed
    with db.engine.connect() as c:
        for desc in (False, True):
            reads = [
                ("events(pallet:)", EVENT_PALLET, lambda d=desc: queries.events(
                    c, net, 2, None, d, pallet="Balances", name=None, account=None,
                    low=None, high=None)),
                ("events(pallet:, name:)", EVENT_NAME, lambda d=desc: queries.events(
                    c, net, 2, None, d, pallet="Balances", name="Transfer", account=None,
                    low=None, high=None)),
                ("extrinsics(pallet:)", {"ix_indexer_extrinsics_pallet"},
                 lambda d=desc: queries.extrinsics(
                     c, net, 2, None, d, pallet="System", call=None, account=None,
                     success=None, low=None, high=None)),
                ("extrinsics(pallet:, call:)", {"ix_indexer_extrinsics_call"},
                 lambda d=desc: queries.extrinsics(
                     c, net, 2, None, d, pallet="Balances", call="transfer_keep_alive",
                     account=None, success=None, low=None, high=None)),
            ]
            for what, indexes, read in reads:
                _assert_served(c, f"{what} page", read, indexes)
                page = read()
                assert len(page.rows) == 2 and page.has_next, what
                _assert_served(c, f"{what}.totalCount",
                               lambda p=page: queries.count(c, p, CAP), indexes)
                assert queries.count(c, page, CAP) == (CAP, True), what


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
        # A name's in is a branch per value beside a pallet (each walks the name index).
        (EventFilter(pallet=StringFilter(in_=["P", "Q", "R"]), name=StringFilter(in_=many)),
         r"^filter\.name\.in: the filter expands to 300 or more"),
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


def test_a_names_in_beside_a_pallet_is_a_branch_per_name():
    """Beside a pallet's equalTo, each name (call) is its own walk of the name (call) index;
    read through an event's account, or without a pallet, the in stays one condition."""
    names = _s(in_=["A", "B", "A", "C"])
    assert len(filters.branches(filters.EVENTS, EventFilter(
        pallet=_eq("P"), name=names))) == 3
    assert len(filters.branches(filters.EVENTS, EventFilter(
        pallet=_s(in_=["P", "Q"]), name=names))) == 6
    assert len(filters.branches(filters.EXTRINSICS, ExtrinsicFilter(
        pallet=_eq("P"), call=_s(in_=["a", "b"])))) == 2
    assert len(filters.branches(filters.EVENTS, EventFilter(
        pallet=_eq("P"), name=names, account=_eq(RARE)))) == 1
    assert len(filters.branches(filters.EVENTS, EventFilter(
        name=names, block_number=IntFilter(greater_than=1, less_than=100)))) == 1


# The one walk the index rules still allow: success beside a pallet checks every extrinsic of
# the pallet in order, and none here failed, so a page of failed ones walks all of them.
RESIDUAL = ExtrinsicFilter(pallet=_eq("Balances"), success=BooleanFilter(equal_to=False))


def test_a_read_past_its_deadline_is_stopped_with_a_clear_error(indexed):
    """query_timeout_s bounds what the database makes of an accepted filter: the walk is
    stopped (SQLite's progress handler, PostgreSQL's statement_timeout) with an error that
    names the setting and what to do; with time enough, the same read answers."""
    db, net = indexed
    stopped = r"longer than 0\.0001 s \(query_timeout_s\).*narrow the filter"
    with db.engine.begin() as c, pytest.raises(queries.QueryError, match=stopped), \
            queries.read_deadline(c, 0.0001):
        queries.count(c, _read(c, net, "extrinsics", RESIDUAL, False, None), CAP)
    with db.engine.begin() as c:
        with queries.read_deadline(c, 60):
            page = _read(c, net, "extrinsics", RESIDUAL, False, None)
            assert page.rows == [] and queries.count(c, page, CAP)[0] == 0
        # The deadline ends with its read: the connection walks on without one.
        assert len(_read(c, net, "extrinsics", ExtrinsicFilter(pallet=_eq("Balances")),
                         False, None).rows) == 2


def test_the_api_stops_a_read_past_query_timeout_s(indexed, tmp_path):
    db, _net = indexed
    api = Api(tmp_path, "ws://127.0.0.1:9", db.engine.url.render_as_string(hide_password=False),
              query_timeout_s=0.0001)
    try:
        status, body = api.post("query($f: ExtrinsicFilter) { extrinsics(first: 5, filter: $f)"
                                " { totalCount edges { node { hash } } } }",
                                {"f": {"pallet": {"equalTo": "Balances"},
                                       "success": {"equalTo": False}}})
    finally:
        api.close()
    messages = [e["message"] for e in body.get("errors") or []]
    assert any("(query_timeout_s)" in m for m in messages), (status, body)

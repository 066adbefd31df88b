"""Reads of the API: keyset pagination over the index, one network at a time.

Cursors are opaque (base64 of the row's sort key) and stable: a row's key never changes and new
blocks only add keys after the existing ones, so a page boundary does not move while the chain
grows.
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Join,
    Select,
    and_,
    func,
    literal,
    literal_column,
    or_,
    select,
    text,
    tuple_,
    union,
)
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.compiler import compiles

from ops_tools.services.indexer.tables import (
    AccountRow,
    Base,
    BlockRow,
    EventAccountRow,
    EventRow,
    ExtrinsicRow,
    HeartbeatRow,
    Network,
    OperatorRow,
    TransferRow,
)


class QueryError(Exception):
    """A bad argument; the message names it, its value and what to do."""


def encode_cursor(kind: str, key: Sequence[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps([kind, *key]).encode()).decode()


def decode_cursor(kind: str, cursor: str) -> list[Any]:
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        if not isinstance(value, list) or value[0] != kind:
            raise ValueError
    except (ValueError, TypeError, IndexError, UnicodeDecodeError):
        raise QueryError(f"after: {cursor!r} is not a cursor of this list; pass an "
                         f"endCursor or edge cursor returned by the same query") from None
    return value[1:]


@dataclass
class Page:
    rows: list[Any]
    keys: list[list[Any]]
    has_next: bool
    has_previous: bool
    #: The list's filter without cursor or limit, as the branches whose union it is: what
    #: ``count`` counts.
    filtered: list[Select[Any]]
    #: Each branch's sort key (what identifies a row across branches).
    cols: list[Sequence[ColumnElement[Any]]]
    #: Count each branch in its order: the order names the table that must lead the walk (a
    #: join read through the accounts, which SQLite would otherwise lead with another key's
    #: index).
    count_in_order: list[bool]


def network(conn: Connection, genesis_hash: str | None) -> Any:
    """The network asked for by genesis hash, or the active one."""
    if genesis_hash is None:
        row = conn.execute(select(Network).where(Network.active.is_(True))).first()
        if row is None:
            raise QueryError("no network indexed yet; the processor has not started")
        return row
    row = conn.execute(select(Network).where(Network.genesis_hash == genesis_hash.lower())).first()
    if row is None:
        known = ", ".join(conn.execute(select(Network.genesis_hash)).scalars())
        raise QueryError(f"genesisHash: {genesis_hash} is not a network this indexer has "
                         f"indexed; known: {known or 'none'}")
    return row


def row_estimates(conn: Connection) -> list[tuple[str, int]]:
    """Rows per table of the index (every network), from statistics, never by counting: on
    PostgreSQL the live tuples its statistics keep, on SQLite the largest rowid (rows are only
    appended, and a rollback deletes few)."""
    tables = Base.metadata.sorted_tables
    names = [t.name for t in tables]
    if conn.dialect.name == "postgresql":
        rows = conn.execute(text(
            "SELECT relname, n_live_tup FROM pg_stat_user_tables WHERE relid IN "
            "(SELECT to_regclass(n) FROM unnest(CAST(:names AS text[])) AS n)"),
            {"names": names})
        found = {r[0]: int(r[1]) for r in rows}
    else:
        found = {t.name: conn.execute(select(func.max(literal_column("rowid")))
                                      .select_from(t)).scalar() or 0 for t in tables}
    return [(n, found.get(n, 0)) for n in names]


def networks(conn: Connection) -> list[Any]:
    return list(conn.execute(select(Network).order_by(Network.id)))


def _after(cols: Sequence[ColumnElement[Any]], key: Sequence[Any], desc: bool) -> Any:
    """Rows strictly after ``key`` in the (lexicographic) sort order of ``cols``."""
    clauses = []
    for i, col in enumerate(cols):
        cmp = col < key[i] if desc else col > key[i]
        clauses.append(and_(*[cols[j] == key[j] for j in range(i)], cmp))
    # The leading column's bound alone is a range an index seeks to: with the OR only, a later
    # page walks its index from the start of the list's range to the cursor.
    return and_(cols[0] <= key[0] if desc else cols[0] >= key[0], or_(*clauses))


# SQLite calls the progress handler every this many virtual-machine steps (a few ms of work).
_SQLITE_STEPS = 10_000


def _timed_out(seconds: float) -> QueryError:
    return QueryError(
        f"the read took longer than {seconds:g} s (query_timeout_s) and was stopped: narrow the"
        " filter with a field an index serves (account, pallet and name or call, signer, a block"
        " range) or ask for a smaller page")


@contextlib.contextmanager
def read_deadline(conn: Connection, seconds: float) -> Iterator[None]:
    """Every statement of one read stops after ``seconds`` with a QueryError: whatever the
    filters and the planner make of them, no request holds the database longer (PostgreSQL's
    statement_timeout for the transaction; SQLite's progress handler, which interrupts it)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SET LOCAL statement_timeout = {max(1, round(seconds * 1000))}")
        try:
            yield
        except DBAPIError as exc:
            if getattr(exc.orig, "sqlstate", None) == "57014":  # query_canceled
                raise _timed_out(seconds) from None
            raise
        return
    raw = conn.connection.driver_connection
    deadline = time.monotonic() + seconds
    raw.set_progress_handler(lambda: time.monotonic() > deadline, _SQLITE_STEPS)
    try:
        yield
    except OperationalError as exc:
        if "interrupted" in str(exc.orig):
            raise _timed_out(seconds) from None
        raise
    finally:
        raw.set_progress_handler(None, 0)


def _index_walks(conn: Connection) -> None:
    """On PostgreSQL, no sequential scan where an index serves the statement, for the rest of
    the read's transaction: by its statistics the planner scans the table for a count of an
    account it takes for a busy one, which stops after the cap's worth of matches only if the
    statistics are right; the index range stops there whatever they say. (SQLite keeps no
    statistics; the shape of its statements decides, see paginate.)"""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET LOCAL enable_seqscan = off")


def paginate(conn: Connection, kind: str, stmt: Select[Any] | Sequence[Select[Any]],
             cols: Sequence[ColumnElement[Any]] | Sequence[Sequence[ColumnElement[Any]]],
             first: int, after: str | None, desc: bool,
             count_in_order: bool | Sequence[bool] = False) -> Page:
    """A page in the order of ``cols`` (one sort key, or one per statement, labelled alike in
    the statements' columns). Several statements: the page of their union, each walked in order
    up to the page's size, then merged; so each branch walks its own index (an either-side
    account filter is two index ranges: as one OR, SQLite's planner walks the whole list in
    primary-key order instead, and a sort of the OR's rows reads all of a busy account's)."""
    branches = [stmt] if isinstance(stmt, Select) else list(stmt)
    per = (list(cols) if cols and isinstance(cols[0], list | tuple)
           else [cols] * len(branches))
    in_order = ([count_in_order] * len(branches) if isinstance(count_in_order, bool)
                else list(count_in_order))
    filtered = branches
    _index_walks(conn)
    if after is not None:
        key = decode_cursor(kind, after)
        if len(key) != len(per[0]):
            raise QueryError(f"after: {after!r} is not a cursor of this list")
        branches = [b.where(_after(c, key, desc)) for b, c in zip(branches, per, strict=True)]
    if len(branches) == 1:
        order = [c.desc() if desc else c.asc() for c in per[0]]
        rows = list(conn.execute(branches[0].order_by(*order).limit(first + 1)))
    else:
        merged = union(*(select(b.order_by(*[c.desc() if desc else c.asc() for c in bc])
                                .limit(first + 1).subquery())
                         for b, bc in zip(branches, per, strict=True))).subquery()
        by = [merged.c[c.key] for c in per[0]]
        rows = list(conn.execute(select(merged).order_by(
            *[c.desc() if desc else c.asc() for c in by]).limit(first + 1)))
    has_next = len(rows) > first
    rows = rows[:first]
    keys = [[getattr(r, c.key) for c in per[0]] for r in rows]
    return Page(rows, keys, has_next, after is not None, filtered, per, in_order)


def count(conn: Connection, page: Page, cap: int) -> tuple[int, bool]:
    """How many rows the page's filter matches, walking at most ``cap + 1`` of them per
    branch: (the count, or ``cap`` when there are more, and whether it was capped). The
    filters are the ones the lists' indexes serve, so each walk is over an index range and
    stops at the cap; it is never a scan of a whole table. Several branches are read one after
    the other, their keys gathered until more than ``cap`` are found (a row several branches
    match, a transfer to oneself, counts once): branches that match apart (an ``in``'s values)
    stop after a few caps' worth; branches that match the same rows can each walk up to the
    cap, which is why the query cost multiplies a filtered list by its branches (limits.py)."""
    _index_walks(conn)
    filtered = [b.order_by(*c) if o else b
                for b, c, o in zip(page.filtered, page.cols, page.count_in_order, strict=True)]
    if len(filtered) == 1:
        walked = conn.execute(select(func.count()).select_from(
            filtered[0].with_only_columns(literal(1)).limit(cap + 1).subquery())
        ).scalar_one()
        return min(walked, cap), walked > cap
    keys: set[tuple[Any, ...]] = set()
    for branch, cols in zip(filtered, page.cols, strict=True):
        keys.update(tuple(r) for r in conn.execute(
            branch.with_only_columns(*cols).limit(cap + 1)))
        if len(keys) > cap:
            return cap, True
    return len(keys), False


def block_count(net: Any, low: int | None, high: int | None) -> int:
    """Exact and free: the index holds every block from the genesis to its height (a rollback
    deletes only above the common ancestor and lowers the height with it)."""
    top = net.height if high is None else min(high, net.height)
    return max(top - max(low or 0, 0) + 1, 0)


def _where(stmt: Select[Any], where: ColumnElement[bool] | None, net: int) -> Select[Any]:
    """``stmt`` narrowed by a compiled filter, whose block time conditions read this
    network's blocks (filters.NETWORK)."""
    if where is None:
        return stmt
    return stmt.where(where).params(filter_network=net)


def _range(stmt: Select[Any], col: ColumnElement[Any], low: int | None,
           high: int | None) -> Select[Any]:
    if low is not None:
        stmt = stmt.where(col >= low)
    if high is not None:
        stmt = stmt.where(col <= high)
    return stmt


Where = ColumnElement[bool] | Sequence[ColumnElement[bool]] | None


def _wheres(where: Where) -> list[ColumnElement[bool] | None]:
    """A compiled filter, or the branches of one (filters.branches) whose union is the list:
    one statement each."""
    return [where] if where is None or isinstance(where, ColumnElement) else list(where)


def blocks(conn: Connection, net: int, first: int, after: str | None, desc: bool,
           low: int | None, high: int | None, where: Where = None) -> Page:
    stmts = [_range(_where(select(BlockRow).where(BlockRow.network_id == net), w, net),
                    BlockRow.number, low, high) for w in _wheres(where)]
    return paginate(conn, "block", stmts, [BlockRow.number], first, after, desc)


def block_hashes(conn: Connection, net: int, low: int, high: int) -> dict[int, str]:
    """The stored hash of each block from ``low`` to ``high`` (a primary-key range)."""
    rows = conn.execute(select(BlockRow.number, BlockRow.hash).where(
        BlockRow.network_id == net, BlockRow.number >= low, BlockRow.number <= high))
    return {r.number: r.hash for r in rows}


def block(conn: Connection, net: int, number: int | None, hash_: str | None) -> Any:
    stmt = select(BlockRow).where(BlockRow.network_id == net)
    if number is not None:
        stmt = stmt.where(BlockRow.number == number)
    if hash_ is not None:
        stmt = stmt.where(BlockRow.hash == hash_.lower())
    return conn.execute(stmt).first()


def extrinsics(conn: Connection, net: int, first: int, after: str | None, desc: bool, *,
               pallet: str | None, call: str | None, account: str | None,
               success: bool | None, low: int | None, high: int | None,
               hash_: str | None = None, where: Where = None) -> Page:
    stmts = []
    for w in _wheres(where):
        stmt = _where(select(ExtrinsicRow).where(ExtrinsicRow.network_id == net), w, net)
        if pallet is not None:
            stmt = stmt.where(ExtrinsicRow.pallet == pallet)
        if call is not None:
            stmt = stmt.where(ExtrinsicRow.call == call)
        if account is not None:
            stmt = stmt.where(ExtrinsicRow.signer == account)
        if success is not None:
            stmt = stmt.where(ExtrinsicRow.success.is_(success))
        if hash_ is not None:
            stmt = stmt.where(ExtrinsicRow.hash == hash_.lower())
        stmts.append(_range(stmt, ExtrinsicRow.block_number, low, high))
    return paginate(conn, "extrinsic", stmts, [ExtrinsicRow.block_number, ExtrinsicRow.idx],
                    first, after, desc)


def events(conn: Connection, net: int, first: int, after: str | None, desc: bool, *,
           pallet: str | None, name: str | None, account: str | None, low: int | None,
           high: int | None, where: Where = None,
           joined: bool | Sequence[bool] = False) -> Page:
    """``where``: a compiled filter, or the branches of one (filters.branches); ``joined``
    (for all of them, or each): the branch's condition names the event's accounts directly
    (filters.Branch.joined), so it is read through them. An account (this argument or the
    filter's) is a walk of the accounts' index, (network, account, block, index), in the list's
    order, each event read by its key: checked event by event instead (EXISTS), an account that
    few events name was a walk of every event of the network. Branches read through the
    accounts and branches read through the events are merged by the same (block, index) key."""
    wheres = _wheres(where)
    joins = [joined] * len(wheres) if isinstance(joined, bool) else list(joined)
    named = ((EventAccountRow.network_id == EventRow.network_id)
             & (EventAccountRow.block_number == EventRow.block_number)
             & (EventAccountRow.event_idx == EventRow.idx))
    stmts, cols, vias = [], [], []
    for w, join in zip(wheres, joins, strict=True):
        via = join or account is not None
        if via:
            # The accounts lead: SQLite, without statistics, would as soon walk a pallet's
            # index in the events and sort what it finds by the accounts' key.
            stmt = select(EventRow, EventAccountRow.event_idx).select_from(_Leading(
                EventAccountRow.__table__, EventRow.__table__, named)).where(
                EventAccountRow.network_id == net)
        else:
            # Labelled as the joined branches' key, which a union of both merges by.
            stmt = select(EventRow, EventRow.idx.label("event_idx")).where(
                EventRow.network_id == net)
        stmt = _where(stmt, w, net)
        if pallet is not None:
            stmt = stmt.where(EventRow.pallet == pallet)
        if name is not None:
            stmt = stmt.where(EventRow.name == name)
        if account is not None and not join:
            stmt = stmt.where(EventAccountRow.account == account)
        elif account is not None:  # the join reads the filter's account; this one is checked
            stmt = stmt.where(select(EventAccountRow.event_idx).where(
                EventAccountRow.network_id == net, EventAccountRow.account == account,
                EventAccountRow.block_number == EventRow.block_number,
                EventAccountRow.event_idx == EventRow.idx).correlate(EventRow).exists())
        stmts.append(_range(stmt, EventAccountRow.block_number if via
                            else EventRow.block_number, low, high))
        cols.append([EventAccountRow.block_number, EventAccountRow.event_idx] if via
                    else [EventRow.block_number, EventRow.idx])
        vias.append(via)
    return paginate(conn, "event", stmts, cols, first, after, desc, count_in_order=vias)


class _Leading(Join):
    """An inner join whose left table leads the walk on SQLite too (``CROSS JOIN``, which its
    planner never reorders; PostgreSQL, with statistics, plans it as a join)."""

    inherit_cache = True


@compiles(_Leading, "sqlite")
def _leading_sqlite(join: _Leading, compiler: Any, **kw: Any) -> str:
    kw.pop("asfrom", None)
    return (join.left._compiler_dispatch(compiler, asfrom=True, **kw) + " CROSS JOIN "
            + join.right._compiler_dispatch(compiler, asfrom=True, **kw) + " ON "
            + join.onclause._compiler_dispatch(compiler, **kw))


def extrinsics_at(conn: Connection, net: int,
                  keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], Any]:
    """The extrinsics at (block number, index) ``keys``, in one query (the primary key)."""
    rows = conn.execute(select(ExtrinsicRow).where(
        ExtrinsicRow.network_id == net,
        tuple_(ExtrinsicRow.block_number, ExtrinsicRow.idx).in_(list(set(keys)))))
    return {(r.block_number, r.idx): r for r in rows}


def events_of_extrinsics(conn: Connection, net: int, keys: Sequence[tuple[int, int]],
                         first: int) -> dict[tuple[int, int], list[Any]]:
    """The first ``first`` events of each extrinsic at (block number, index) ``keys``, in one
    query: the blocks' events through the primary key, numbered per extrinsic."""
    wanted = set(keys)
    rank = func.row_number().over(partition_by=(EventRow.block_number, EventRow.extrinsic_idx),
                                  order_by=EventRow.idx).label("rank")
    inner = select(EventRow, rank).where(
        EventRow.network_id == net,
        EventRow.block_number.in_(sorted({b for b, _ in wanted})),
        tuple_(EventRow.block_number, EventRow.extrinsic_idx).in_(list(wanted))).subquery()
    out: dict[tuple[int, int], list[Any]] = {k: [] for k in wanted}
    for row in conn.execute(select(inner).where(inner.c.rank <= first)
                            .order_by(inner.c.block_number, inner.c.idx)):
        out[(row.block_number, row.extrinsic_idx)].append(row)
    return out


def transfers(conn: Connection, net: int, first: int, after: str | None, desc: bool, *,
              account: str | None, sender: str | None, recipient: str | None,
              low: int | None, high: int | None,
              where: Where = None) -> Page:
    """``where``: a compiled filter, or the branches of one (filters.branches) whose union is
    the list; an ``account`` (either side) makes two branches of each."""
    wheres = _wheres(where)
    sides = [None] if account is None else [TransferRow.sender == account,
                                            TransferRow.recipient == account]
    branches = []
    for w in wheres:
        for side in sides:
            stmt = _where(select(TransferRow).where(TransferRow.network_id == net), w, net)
            if side is not None:
                stmt = stmt.where(side)
            if sender is not None:
                stmt = stmt.where(TransferRow.sender == sender)
            if recipient is not None:
                stmt = stmt.where(TransferRow.recipient == recipient)
            branches.append(_range(stmt, TransferRow.block_number, low, high))
    return paginate(conn, "transfer", branches, [TransferRow.block_number, TransferRow.event_idx],
                    first, after, desc)


def heartbeats(conn: Connection, net: int, first: int, after: str | None, desc: bool, *,
               account: str | None, low: int | None, high: int | None,
               where: Where = None) -> Page:
    stmts = []
    for w in _wheres(where):
        stmt = _where(select(HeartbeatRow).where(HeartbeatRow.network_id == net), w, net)
        if account is not None:
            stmt = stmt.where(HeartbeatRow.account == account)
        stmts.append(_range(stmt, HeartbeatRow.block_number, low, high))
    return paginate(conn, "heartbeat", stmts,
                    [HeartbeatRow.block_number, HeartbeatRow.event_idx], first, after, desc)


def operators(conn: Connection, net: int, first: int, after: str | None, desc: bool, *,
              account: str | None, where: ColumnElement[bool] | None = None) -> Page:
    stmt = _where(select(OperatorRow).where(OperatorRow.network_id == net), where, net)
    if account is not None:
        stmt = stmt.where(OperatorRow.account == account)
    return paginate(conn, "operator", stmt, [OperatorRow.account], first, after, desc)


def accounts(conn: Connection, net: int, first: int, after: str | None, desc: bool, *,
             address: str | None, where: ColumnElement[bool] | None = None) -> Page:
    stmt = _where(select(AccountRow).where(AccountRow.network_id == net), where, net)
    if address is not None:
        stmt = stmt.where(AccountRow.address == address)
    return paginate(conn, "account", stmt, [AccountRow.address], first, after, desc)

"""Reads of the API: keyset pagination over the index, one network at a time.

Cursors are opaque (base64 of the row's sort key) and stable: a row's key never changes and new
blocks only add keys after the existing ones, so a page boundary does not move while the chain
grows.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Connection, Select, and_, or_, select

from ops_tools.services.indexer.tables import (
    AccountRow,
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


def networks(conn: Connection) -> list[Any]:
    return list(conn.execute(select(Network).order_by(Network.id)))


def _after(cols: Sequence[ColumnElement[Any]], key: Sequence[Any], desc: bool) -> Any:
    """Rows strictly after ``key`` in the (lexicographic) sort order of ``cols``."""
    clauses = []
    for i, col in enumerate(cols):
        cmp = col < key[i] if desc else col > key[i]
        clauses.append(and_(*[cols[j] == key[j] for j in range(i)], cmp))
    return or_(*clauses)


def paginate(conn: Connection, kind: str, stmt: Select[Any], cols: Sequence[ColumnElement[Any]],
             first: int, after: str | None, desc: bool) -> Page:
    if after is not None:
        key = decode_cursor(kind, after)
        if len(key) != len(cols):
            raise QueryError(f"after: {after!r} is not a cursor of this list")
        stmt = stmt.where(_after(cols, key, desc))
    order = [c.desc() if desc else c.asc() for c in cols]
    rows = list(conn.execute(stmt.order_by(*order).limit(first + 1)))
    has_next = len(rows) > first
    rows = rows[:first]
    keys = [[getattr(r, c.key) for c in cols] for r in rows]
    return Page(rows, keys, has_next, after is not None)


def _range(stmt: Select[Any], col: ColumnElement[Any], low: int | None,
           high: int | None) -> Select[Any]:
    if low is not None:
        stmt = stmt.where(col >= low)
    if high is not None:
        stmt = stmt.where(col <= high)
    return stmt


def blocks(conn: Connection, net: int, first: int, after: str | None, desc: bool,
           low: int | None, high: int | None) -> Page:
    stmt = _range(select(BlockRow).where(BlockRow.network_id == net), BlockRow.number, low, high)
    return paginate(conn, "block", stmt, [BlockRow.number], first, after, desc)


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
               hash_: str | None = None) -> Page:
    stmt = select(ExtrinsicRow).where(ExtrinsicRow.network_id == net)
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
    stmt = _range(stmt, ExtrinsicRow.block_number, low, high)
    return paginate(conn, "extrinsic", stmt, [ExtrinsicRow.block_number, ExtrinsicRow.idx],
                    first, after, desc)


def events(conn: Connection, net: int, first: int, after: str | None, desc: bool, *,
           pallet: str | None, name: str | None, account: str | None, low: int | None,
           high: int | None, extrinsic: tuple[int, int] | None = None) -> Page:
    stmt = select(EventRow).where(EventRow.network_id == net)
    if pallet is not None:
        stmt = stmt.where(EventRow.pallet == pallet)
    if name is not None:
        stmt = stmt.where(EventRow.name == name)
    if account is not None:
        stmt = stmt.where(select(EventAccountRow.event_idx).where(
            EventAccountRow.network_id == net, EventAccountRow.account == account,
            EventAccountRow.block_number == EventRow.block_number,
            EventAccountRow.event_idx == EventRow.idx).exists())
    if extrinsic is not None:
        stmt = stmt.where(EventRow.block_number == extrinsic[0],
                          EventRow.extrinsic_idx == extrinsic[1])
    stmt = _range(stmt, EventRow.block_number, low, high)
    return paginate(conn, "event", stmt, [EventRow.block_number, EventRow.idx], first, after,
                    desc)


def extrinsic_at(conn: Connection, net: int, number: int, idx: int) -> Any:
    return conn.execute(select(ExtrinsicRow).where(
        ExtrinsicRow.network_id == net, ExtrinsicRow.block_number == number,
        ExtrinsicRow.idx == idx)).first()


def transfers(conn: Connection, net: int, first: int, after: str | None, desc: bool, *,
              account: str | None, sender: str | None, recipient: str | None,
              low: int | None, high: int | None) -> Page:
    stmt = select(TransferRow).where(TransferRow.network_id == net)
    if account is not None:
        stmt = stmt.where(or_(TransferRow.sender == account, TransferRow.recipient == account))
    if sender is not None:
        stmt = stmt.where(TransferRow.sender == sender)
    if recipient is not None:
        stmt = stmt.where(TransferRow.recipient == recipient)
    stmt = _range(stmt, TransferRow.block_number, low, high)
    return paginate(conn, "transfer", stmt, [TransferRow.block_number, TransferRow.event_idx],
                    first, after, desc)


def heartbeats(conn: Connection, net: int, first: int, after: str | None, desc: bool, *,
               account: str | None, low: int | None, high: int | None) -> Page:
    stmt = select(HeartbeatRow).where(HeartbeatRow.network_id == net)
    if account is not None:
        stmt = stmt.where(HeartbeatRow.account == account)
    stmt = _range(stmt, HeartbeatRow.block_number, low, high)
    return paginate(conn, "heartbeat", stmt, [HeartbeatRow.block_number, HeartbeatRow.event_idx],
                    first, after, desc)


def operators(conn: Connection, net: int, first: int, after: str | None, desc: bool, *,
              account: str | None) -> Page:
    stmt = select(OperatorRow).where(OperatorRow.network_id == net)
    if account is not None:
        stmt = stmt.where(OperatorRow.account == account)
    return paginate(conn, "operator", stmt, [OperatorRow.account], first, after, desc)


def accounts(conn: Connection, net: int, first: int, after: str | None, desc: bool, *,
             address: str | None) -> Page:
    stmt = select(AccountRow).where(AccountRow.network_id == net)
    if address is not None:
        stmt = stmt.where(AccountRow.address == address)
    return paginate(conn, "account", stmt, [AccountRow.address], first, after, desc)

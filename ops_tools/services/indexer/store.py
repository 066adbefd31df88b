"""Writes of the processor: networks (reset handling), blocks in bulk, rollbacks, snapshots.

Every function takes a SQLAlchemy ``Connection`` inside the caller's transaction, so a batch of
blocks, its snapshots and the status land together or not at all.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, text, update

from ops_tools.services.indexer.model import Block
from ops_tools.services.indexer.tables import (
    PER_BLOCK,
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


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), default=str)


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class ActiveNetwork:
    id: int
    genesis_hash: str
    reset_count: int
    created: bool  # this call added it (first start, or a reset)
    archived: str | None = None  # the genesis hash this call archived (a reset)


def ensure_network(conn: Connection, genesis_hash: str, chain_name: str | None) -> ActiveNetwork:
    """The network of ``genesis_hash``, made the active one. Another active network means the
    chain was reset: it is archived (its rows stay) and the reset counter goes up by one."""
    active = conn.execute(select(Network).where(Network.active.is_(True))).first()
    if active is not None and active.genesis_hash == genesis_hash:
        return ActiveNetwork(active.id, genesis_hash, active.reset_count, False)
    now = _now()
    resets = 0
    if active is not None:
        conn.execute(update(Network).where(Network.id == active.id)
                     .values(active=False, archived_at=now))
        resets = active.reset_count + 1
    known = conn.execute(select(Network).where(Network.genesis_hash == genesis_hash)).first()
    if known is not None:
        # The chain went back to a genesis indexed before: resume it, still a reset.
        conn.execute(update(Network).where(Network.id == known.id)
                     .values(active=True, archived_at=None, reset_count=resets))
        return ActiveNetwork(known.id, genesis_hash, resets, True,
                             active.genesis_hash if active else None)
    net_id = conn.execute(insert(Network).values(
        genesis_hash=genesis_hash, chain_name=chain_name, reset_count=resets, active=True,
        started_at=now, height=-1, finalized_height=-1, chain_height=0,
        chain_finalized_height=0,
    )).inserted_primary_key[0]
    return ActiveNetwork(int(net_id), genesis_hash, resets, True,
                         active.genesis_hash if active else None)


def tip(conn: Connection, net: int) -> tuple[int, str] | None:
    row = conn.execute(select(BlockRow.number, BlockRow.hash).where(BlockRow.network_id == net)
                       .order_by(BlockRow.number.desc()).limit(1)).first()
    return (row.number, row.hash) if row else None


def stored_hashes(conn: Connection, net: int, low: int, high: int) -> dict[int, str]:
    rows = conn.execute(select(BlockRow.number, BlockRow.hash).where(
        BlockRow.network_id == net, BlockRow.number >= low, BlockRow.number <= high))
    return {r.number: r.hash for r in rows}


def finalized(conn: Connection, net: int) -> tuple[int, str | None]:
    """The finalized height and hash the index recorded (-1, None: none yet)."""
    row = conn.execute(select(Network.finalized_height, Network.finalized_hash)
                       .where(Network.id == net)).one()
    return row.finalized_height, row.finalized_hash


def block_hash(conn: Connection, net: int, number: int) -> str | None:
    return conn.execute(select(BlockRow.hash).where(
        BlockRow.network_id == net, BlockRow.number == number)).scalar()


def insert_blocks(conn: Connection, net: int, blocks: Sequence[Block]) -> None:
    """One bulk insert per table (executemany)."""
    rows: dict[type, list[dict[str, Any]]] = {t: [] for t in PER_BLOCK}
    for b in blocks:
        rows[BlockRow].append({"network_id": net, "number": b.number, "hash": b.hash,
                               "parent_hash": b.parent_hash, "spec_version": b.spec_version,
                               "extrinsic_count": len(b.extrinsics),
                               "event_count": len(b.events), "timestamp": b.timestamp})
        for x in b.extrinsics:
            rows[ExtrinsicRow].append({
                "network_id": net, "block_number": b.number, "idx": x.index, "hash": x.hash,
                "signer": x.signer, "pallet": x.pallet, "call": x.call, "args": _json(x.args),
                "success": x.success, "fee": None if x.fee is None else str(x.fee),
                "error": None if x.error is None else _json(x.error)})
        for e in b.events:
            rows[EventRow].append({
                "network_id": net, "block_number": b.number, "idx": e.index,
                "extrinsic_idx": e.extrinsic_index, "phase": e.phase, "pallet": e.pallet,
                "name": e.name, "args": _json(e.args)})
            for account in e.accounts:
                rows[EventAccountRow].append({"network_id": net, "account": account,
                                              "block_number": b.number, "event_idx": e.index})
        for t in b.transfers:
            rows[TransferRow].append({
                "network_id": net, "block_number": b.number, "event_idx": t.event_index,
                "extrinsic_idx": t.extrinsic_index, "extrinsic_hash": t.extrinsic_hash,
                "sender": t.sender, "recipient": t.recipient, "amount": str(t.amount)})
        for h in b.heartbeats:
            rows[HeartbeatRow].append({
                "network_id": net, "block_number": b.number, "event_idx": h.event_index,
                "extrinsic_hash": h.extrinsic_hash, "account": h.account, "epoch": h.epoch})
    for table, values in rows.items():
        if values:
            bulk_insert(conn, table.__tablename__, values)


def bulk_insert(conn: Connection, table: str, rows: Sequence[dict[str, Any]]) -> None:
    """Rows of one shape into ``table`` at the driver's speed, inside the caller's transaction:
    COPY on PostgreSQL (the server parses no statement per row), the driver's executemany of
    one prepared statement on SQLite (no per-row parameter processing of SQLAlchemy's)."""
    columns = list(rows[0])
    if conn.dialect.name == "postgresql":
        from psycopg import sql

        copy_sql = sql.SQL("COPY {} ({}) FROM STDIN").format(
            sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, columns)))
        raw = conn.connection.driver_connection
        assert raw is not None
        with raw.cursor() as cursor, cursor.copy(copy_sql) as copy:
            for row in rows:
                copy.write_row([row[c] for c in columns])
        return
    names = ", ".join(f'"{c}"' for c in columns)
    statement = (f'INSERT INTO "{table}" ({names}) '  # noqa: S608 - our own names
                 f"VALUES ({', '.join('?' * len(columns))})")
    conn.exec_driver_sql(statement, [tuple(row[c] for c in columns) for row in rows])


def touched_above(conn: Connection, net: int, number: int) -> tuple[set[str], set[str]]:
    """Accounts and operators named by events or signers above ``number`` (what a rollback to
    ``number`` must read again)."""
    accounts = set(conn.execute(select(EventAccountRow.account).where(
        EventAccountRow.network_id == net, EventAccountRow.block_number > number)).scalars())
    accounts |= {s for s in conn.execute(select(ExtrinsicRow.signer).where(
        ExtrinsicRow.network_id == net, ExtrinsicRow.block_number > number)).scalars() if s}
    same_event = ((EventRow.network_id == EventAccountRow.network_id)
                  & (EventRow.block_number == EventAccountRow.block_number)
                  & (EventRow.idx == EventAccountRow.event_idx))
    operators = set(conn.execute(
        select(EventAccountRow.account).join(EventRow, same_event)
        .where(EventAccountRow.network_id == net, EventAccountRow.block_number > number,
               EventRow.pallet == "OperatorStake")).scalars())
    return accounts, operators


def rollback(conn: Connection, net: int, ancestor: int) -> int:
    """Deletes every block above ``ancestor`` with what hangs off it; returns how many blocks."""
    removed = conn.execute(select(func.count()).select_from(BlockRow).where(
        BlockRow.network_id == net, BlockRow.number > ancestor)).scalar_one()
    for table in PER_BLOCK:
        column = table.number if table is BlockRow else table.block_number
        conn.execute(delete(table).where(table.network_id == net, column > ancestor))
    return int(removed)


def put_accounts(conn: Connection, net: int, block_number: int,
                 values: dict[str, dict[str, Any] | None]) -> None:
    """Snapshot of ``System.Account`` per address at ``block_number`` (None: the account is
    gone)."""
    if not values:
        return
    addresses = list(values)
    conn.execute(delete(AccountRow).where(AccountRow.network_id == net,
                                          AccountRow.address.in_(addresses)))
    rows = []
    for address, info in values.items():
        if info is None:
            continue
        data = info.get("data", {})
        rows.append({"network_id": net, "address": address, "free": str(data.get("free", 0)),
                     "reserved": str(data.get("reserved", 0)),
                     "frozen": str(data.get("frozen", data.get("misc_frozen", 0))),
                     "nonce": int(info.get("nonce", 0)), "block_number": block_number})
    if rows:
        conn.execute(insert(AccountRow), rows)


def put_operators(conn: Connection, net: int, block_number: int,
                  values: dict[str, dict[str, Any] | None]) -> None:
    if not values:
        return
    conn.execute(delete(OperatorRow).where(OperatorRow.network_id == net,
                                           OperatorRow.account.in_(list(values))))
    rows = [{"network_id": net, "account": account, "stake": str(info["stake"]),
             "attestation_hash": info["attestation_hash"],
             "last_heartbeat_epoch": int(info["last_heartbeat_epoch"]),
             "registered_at": int(info["registered_at"]), "block_number": block_number}
            for account, info in values.items() if info is not None]
    if rows:
        conn.execute(insert(OperatorRow), rows)


def set_status(conn: Connection, net: int, **values: Any) -> None:
    conn.execute(update(Network).where(Network.id == net).values(updated_at=_now(), **values))
    if conn.dialect.name == "postgresql":
        # Delivered at this transaction's commit: the API's subscriptions read what is new.
        conn.execute(text("SELECT pg_notify('indexer_commit', '')"))


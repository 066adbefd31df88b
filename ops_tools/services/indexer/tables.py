"""The indexer's tables (prefix ``indexer_``). Every row belongs to one network, identified by
its genesis hash: a reset adds a network and archives the old one, whose rows stay queryable.

Amounts (u128 plancks) are decimal strings: neither SQLite integers nor JSON numbers hold them.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class Network(Base):
    __tablename__ = "indexer_networks"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    genesis_hash: Mapped[str] = mapped_column(String(66), unique=True)
    chain_name: Mapped[str | None] = mapped_column(String(200))
    reset_count: Mapped[int] = mapped_column(Integer, default=0)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    started_at = mapped_column(DateTime(timezone=True))
    archived_at = mapped_column(DateTime(timezone=True), nullable=True)
    height: Mapped[int] = mapped_column(BigInteger, default=-1)
    hash: Mapped[str | None] = mapped_column(String(66))
    finalized_height: Mapped[int] = mapped_column(BigInteger, default=-1)
    finalized_hash: Mapped[str | None] = mapped_column(String(66))
    chain_height: Mapped[int] = mapped_column(BigInteger, default=0)
    chain_finalized_height: Mapped[int] = mapped_column(BigInteger, default=0)
    spec_version: Mapped[int | None] = mapped_column(Integer)
    spec_name: Mapped[str | None] = mapped_column(String(100))
    updated_at = mapped_column(DateTime(timezone=True), nullable=True)


def _net() -> Mapped[int]:
    return mapped_column(ForeignKey("indexer_networks.id"), primary_key=True)


class BlockRow(Base):
    __tablename__ = "indexer_blocks"

    network_id: Mapped[int] = _net()
    number: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    hash: Mapped[str] = mapped_column(String(66))
    parent_hash: Mapped[str] = mapped_column(String(66))
    spec_version: Mapped[int] = mapped_column(Integer)
    extrinsic_count: Mapped[int] = mapped_column(Integer)
    event_count: Mapped[int] = mapped_column(Integer)
    #: Timestamp.Now at the block (ms since the epoch); None where the chain keeps no time.
    timestamp: Mapped[int | None] = mapped_column(BigInteger)

    __table_args__ = (Index("ix_indexer_blocks_hash", "network_id", "hash"),
                      Index("ix_indexer_blocks_timestamp", "network_id", "timestamp"))


class ExtrinsicRow(Base):
    __tablename__ = "indexer_extrinsics"

    network_id: Mapped[int] = _net()
    block_number: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    idx: Mapped[int] = mapped_column(Integer, primary_key=True)
    hash: Mapped[str] = mapped_column(String(66))
    signer: Mapped[str | None] = mapped_column(String(64))
    pallet: Mapped[str] = mapped_column(String(100))
    call: Mapped[str] = mapped_column(String(100))
    args: Mapped[str] = mapped_column(Text)
    success: Mapped[bool] = mapped_column(Boolean)
    fee: Mapped[str | None] = mapped_column(String(40))
    error: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        Index("ix_indexer_extrinsics_signer", "network_id", "signer", "block_number", "idx"),
        # A pallet (and call) filter's page is an ordered walk of its range: each index ends
        # with the list's whole sort key (migration 0005).
        Index("ix_indexer_extrinsics_pallet", "network_id", "pallet", "block_number", "idx"),
        Index("ix_indexer_extrinsics_call", "network_id", "pallet", "call", "block_number",
              "idx"),
        Index("ix_indexer_extrinsics_hash", "network_id", "hash"),
    )


class EventRow(Base):
    __tablename__ = "indexer_events"

    network_id: Mapped[int] = _net()
    block_number: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    idx: Mapped[int] = mapped_column(Integer, primary_key=True)
    extrinsic_idx: Mapped[int | None] = mapped_column(Integer)
    phase: Mapped[str] = mapped_column(String(32))
    pallet: Mapped[str] = mapped_column(String(100))
    name: Mapped[str] = mapped_column(String(100))
    args: Mapped[str] = mapped_column(Text)

    __table_args__ = (
        # As the extrinsics' pallet and call indexes (migration 0005).
        Index("ix_indexer_events_pallet", "network_id", "pallet", "block_number", "idx"),
        Index("ix_indexer_events_name", "network_id", "pallet", "name", "block_number", "idx"),
    )


class EventAccountRow(Base):
    """Which accounts an event names (the account filter of ``events``)."""

    __tablename__ = "indexer_event_accounts"

    network_id: Mapped[int] = _net()
    account: Mapped[str] = mapped_column(String(64), primary_key=True)
    block_number: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    event_idx: Mapped[int] = mapped_column(Integer, primary_key=True)


class TransferRow(Base):
    __tablename__ = "indexer_transfers"

    network_id: Mapped[int] = _net()
    block_number: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    event_idx: Mapped[int] = mapped_column(Integer, primary_key=True)
    extrinsic_idx: Mapped[int | None] = mapped_column(Integer)
    extrinsic_hash: Mapped[str | None] = mapped_column(String(66))
    sender: Mapped[str] = mapped_column(String(64))
    recipient: Mapped[str] = mapped_column(String(64))
    amount: Mapped[str] = mapped_column(String(40))

    __table_args__ = (
        Index("ix_indexer_transfers_sender", "network_id", "sender", "block_number",
              "event_idx"),
        Index("ix_indexer_transfers_recipient", "network_id", "recipient", "block_number",
              "event_idx"),
    )


class HeartbeatRow(Base):
    __tablename__ = "indexer_heartbeats"

    network_id: Mapped[int] = _net()
    block_number: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    event_idx: Mapped[int] = mapped_column(Integer, primary_key=True)
    extrinsic_hash: Mapped[str | None] = mapped_column(String(66))
    account: Mapped[str] = mapped_column(String(64))
    epoch: Mapped[int] = mapped_column(BigInteger)

    __table_args__ = (
        Index("ix_indexer_heartbeats_account", "network_id", "account", "block_number",
              "event_idx"),
    )


class AccountRow(Base):
    """An account's balance as of ``block_number`` (the last indexed block that touched it, or
    the tip a rollback returned to), read from ``System.Account``."""

    __tablename__ = "indexer_accounts"

    network_id: Mapped[int] = _net()
    address: Mapped[str] = mapped_column(String(64), primary_key=True)
    free: Mapped[str] = mapped_column(String(40))
    reserved: Mapped[str] = mapped_column(String(40))
    frozen: Mapped[str] = mapped_column(String(40))
    nonce: Mapped[int] = mapped_column(BigInteger)
    block_number: Mapped[int] = mapped_column(BigInteger)


class OperatorRow(Base):
    """A registered operator as ``OperatorStake.Operators`` holds it at ``block_number``."""

    __tablename__ = "indexer_operators"

    network_id: Mapped[int] = _net()
    account: Mapped[str] = mapped_column(String(64), primary_key=True)
    stake: Mapped[str] = mapped_column(String(40))
    attestation_hash: Mapped[str] = mapped_column(String(66))
    last_heartbeat_epoch: Mapped[int] = mapped_column(BigInteger)
    registered_at: Mapped[int] = mapped_column(BigInteger)
    block_number: Mapped[int] = mapped_column(BigInteger)


#: Tables whose rows hang off a block number: what a rollback deletes above the ancestor.
PER_BLOCK = (BlockRow, ExtrinsicRow, EventRow, EventAccountRow, TransferRow, HeartbeatRow)

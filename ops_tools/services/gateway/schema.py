"""The gateway's tables (prefix ``gateway_``), shared by every gateway instance of a network."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

metadata = MetaData()

api_keys = Table(
    "gateway_api_keys",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    # SHA-256 of the key: keys are 256 random bits, so no salt or slow hash is needed.
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("key_prefix", String(24), nullable=False),
    Column("account", String(64), nullable=False),
    Column("budget", BigInteger, nullable=True),  # plancks; NULL: no budget
    Column("spent", BigInteger, nullable=False, default=0),
    Column("reserved", BigInteger, nullable=False, default=0),
    Column("rpm", Integer, nullable=True),
    Column("tpm", Integer, nullable=True),
    Column("label", String(200), nullable=True),
    Column("created_at", Float, nullable=False),
    Column("revoked_at", Float, nullable=True),
)

rate_windows = Table(
    "gateway_rate_windows",
    metadata,
    Column("key_id", Integer, primary_key=True),
    Column("window", BigInteger, primary_key=True),  # unix minute
    Column("requests", Integer, nullable=False, default=0),
    Column("tokens", BigInteger, nullable=False, default=0),
)

receipts = Table(
    "gateway_receipts",
    metadata,
    Column("id", String(64), primary_key=True),  # the request id (X-Request-Id)
    Column("key_id", Integer, nullable=False),
    Column("payer", String(64), nullable=False),
    Column("operator", String(64), nullable=True),
    Column("worker", String(300), nullable=True),
    Column("model", String(200), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("input_tokens", Integer, nullable=False, default=0),
    Column("output_tokens", Integer, nullable=False, default=0),
    Column("cost", BigInteger, nullable=False, default=0),
    Column("reserved", BigInteger, nullable=False, default=0),
    Column("status", String(16), nullable=False),  # open | ok | partial | failed
    Column("error", Text, nullable=True),
    Column("genesis_hash", String(66), nullable=False),
    Column("created_at", Float, nullable=False),
    # open (in flight) -> pending -> claimed (a settlement run took it) -> settled; closed: its
    # network was reset
    Column("settle_status", String(16), nullable=False, default="pending"),
    Column("settlement_id", Integer, nullable=True),
    Column("settled_extrinsic", String(66), nullable=True),
    Column("settled_block", BigInteger, nullable=True),
    # What the worker reported when it was not billed as reported (usage.py).
    Column("usage_discrepancy", Text, nullable=True),
    Index("gateway_receipts_key", "key_id", "created_at"),
    Index("gateway_receipts_settle", "settle_status", "operator"),
)

settlements = Table(
    "gateway_settlements",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("operator", String(64), nullable=False),
    Column("amount", BigInteger, nullable=False),
    Column("receipts", Integer, nullable=False),
    Column("genesis_hash", String(66), nullable=False),
    # submitting (claimed) -> submitted (extrinsic recorded, then sent) -> settled | failed
    Column("status", String(16), nullable=False),
    Column("extrinsic_hash", String(66), nullable=True),
    Column("block_hash", String(66), nullable=True),
    Column("block_number", BigInteger, nullable=True),
    Column("error", Text, nullable=True),
    Column("created_at", Float, nullable=False),
    # The signed transfer, recorded before it is sent: its nonce and mortal era (the block it
    # was born at and the period) decide an unknown outcome against the chain.
    Column("nonce", BigInteger, nullable=True),
    Column("era_birth", BigInteger, nullable=True),
    Column("era_period", Integer, nullable=True),
)

operator_conduct = Table(
    "gateway_operator_conduct",
    metadata,
    Column("operator", String(64), primary_key=True),
    Column("genesis_hash", String(66), primary_key=True),
    Column("misreports", Integer, nullable=False),
    Column("last_reason", Text, nullable=True),
    Column("last_at", Float, nullable=False),
)

workers = Table(
    "gateway_workers",
    metadata,
    Column("worker_id", String(400), primary_key=True),
    Column("operator", String(64), nullable=False),
    Column("endpoint", String(300), nullable=False),
    Column("models", Text, nullable=False),  # JSON list
    Column("capacity", Integer, nullable=False),
    Column("genesis_hash", String(66), nullable=False),
    Column("announced_at", Float, nullable=False),
)

heartbeats = Table(
    "gateway_heartbeats",
    metadata,
    Column("operator", String(64), primary_key=True),
    Column("genesis_hash", String(66), primary_key=True),
    Column("epoch", BigInteger, nullable=False),
    Column("timestamp", BigInteger, nullable=False),
    Column("received_at", Float, nullable=False),
)

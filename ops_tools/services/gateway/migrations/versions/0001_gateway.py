"""The gateway's tables: API keys, rate windows, receipts, settlements, workers, heartbeats."""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "gateway_api_keys",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("key_prefix", sa.String(24), nullable=False),
        sa.Column("account", sa.String(64), nullable=False),
        sa.Column("budget", sa.BigInteger, nullable=True),
        sa.Column("spent", sa.BigInteger, nullable=False),
        sa.Column("reserved", sa.BigInteger, nullable=False),
        sa.Column("rpm", sa.Integer, nullable=True),
        sa.Column("tpm", sa.Integer, nullable=True),
        sa.Column("label", sa.String(200), nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("revoked_at", sa.Float, nullable=True),
    )
    op.create_table(
        "gateway_rate_windows",
        sa.Column("key_id", sa.Integer, primary_key=True),
        sa.Column("window", sa.BigInteger, primary_key=True),
        sa.Column("requests", sa.Integer, nullable=False),
        sa.Column("tokens", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "gateway_receipts",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("key_id", sa.Integer, nullable=False),
        sa.Column("payer", sa.String(64), nullable=False),
        sa.Column("operator", sa.String(64), nullable=True),
        sa.Column("worker", sa.String(300), nullable=True),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("input_tokens", sa.Integer, nullable=False),
        sa.Column("output_tokens", sa.Integer, nullable=False),
        sa.Column("cost", sa.BigInteger, nullable=False),
        sa.Column("reserved", sa.BigInteger, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("genesis_hash", sa.String(66), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("settle_status", sa.String(16), nullable=False),
        sa.Column("settlement_id", sa.Integer, nullable=True),
        sa.Column("settled_extrinsic", sa.String(66), nullable=True),
        sa.Column("settled_block", sa.BigInteger, nullable=True),
    )
    op.create_index("gateway_receipts_key", "gateway_receipts", ["key_id", "created_at"])
    op.create_index("gateway_receipts_settle", "gateway_receipts", ["settle_status", "operator"])
    op.create_table(
        "gateway_settlements",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("operator", sa.String(64), nullable=False),
        sa.Column("amount", sa.BigInteger, nullable=False),
        sa.Column("receipts", sa.Integer, nullable=False),
        sa.Column("genesis_hash", sa.String(66), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("extrinsic_hash", sa.String(66), nullable=True),
        sa.Column("block_hash", sa.String(66), nullable=True),
        sa.Column("block_number", sa.BigInteger, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "gateway_workers",
        sa.Column("worker_id", sa.String(400), primary_key=True),
        sa.Column("operator", sa.String(64), nullable=False),
        sa.Column("endpoint", sa.String(300), nullable=False),
        sa.Column("models", sa.Text, nullable=False),
        sa.Column("capacity", sa.Integer, nullable=False),
        sa.Column("genesis_hash", sa.String(66), nullable=False),
        sa.Column("announced_at", sa.Float, nullable=False),
    )
    op.create_table(
        "gateway_heartbeats",
        sa.Column("operator", sa.String(64), primary_key=True),
        sa.Column("genesis_hash", sa.String(66), primary_key=True),
        sa.Column("epoch", sa.BigInteger, nullable=False),
        sa.Column("timestamp", sa.BigInteger, nullable=False),
        sa.Column("received_at", sa.Float, nullable=False),
    )

"""the faucet's ledger: drips and rate-limit events, per genesis"""

import sqlalchemy as sa
from alembic import op

from ops_tools.services.common.ratelimit import rate_events_table

revision = "0001"
down_revision = None


def upgrade() -> None:
    rate_events_table(sa.MetaData(), "faucet").create(op.get_bind())
    op.create_table(
        "faucet_drips",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True,
                  autoincrement=True),
        sa.Column("genesis", sa.String(66), nullable=False),
        sa.Column("recipient_hash", sa.String(64), nullable=False),
        sa.Column("client_hash", sa.String(64), nullable=False),
        sa.Column("idempotency_hash", sa.String(64), nullable=True),
        sa.Column("reservation", sa.String(32), nullable=True),
        sa.Column("amount", sa.BigInteger, nullable=False),
        sa.Column("status", sa.String(12), nullable=False),
        sa.Column("extrinsic_hash", sa.String(66), nullable=True),
        sa.Column("block_hash", sa.String(66), nullable=True),
        sa.Column("block_number", sa.BigInteger, nullable=True),
        sa.Column("error_code", sa.String(40), nullable=True),
        sa.Column("response", sa.Text, nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_index("ux_faucet_drips_idempotency", "faucet_drips",
                    ["genesis", "idempotency_hash"], unique=True)
    op.create_index("ix_faucet_drips_genesis_status", "faucet_drips", ["genesis", "status"])

"""Bounded billing: the usage discrepancy on receipts, misreports per operator, and the signed
settlement transfer (nonce, mortal era) recorded before it is sent."""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    with op.batch_alter_table("gateway_receipts") as batch:
        batch.add_column(sa.Column("usage_discrepancy", sa.Text, nullable=True))
    with op.batch_alter_table("gateway_settlements") as batch:
        batch.add_column(sa.Column("nonce", sa.BigInteger, nullable=True))
        batch.add_column(sa.Column("era_birth", sa.BigInteger, nullable=True))
        batch.add_column(sa.Column("era_period", sa.Integer, nullable=True))
    op.create_table(
        "gateway_operator_conduct",
        sa.Column("operator", sa.String(64), primary_key=True),
        sa.Column("genesis_hash", sa.String(66), primary_key=True),
        sa.Column("misreports", sa.Integer, nullable=False),
        sa.Column("last_reason", sa.Text, nullable=True),
        sa.Column("last_at", sa.Float, nullable=False),
    )

"""attest_reports and attest_rate_events"""

import sqlalchemy as sa
from alembic import op

from ops_tools.services.common.ratelimit import rate_events_table

revision = "0001"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "attest_reports",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True,
                  autoincrement=True),
        sa.Column("hash", sa.String(66), nullable=False, unique=True),
        sa.Column("operator_id", sa.String(64), nullable=False),
        sa.Column("account", sa.String(64), nullable=True),
        sa.Column("genesis_hash", sa.String(66), nullable=False),
        sa.Column("issued_at", sa.String(20), nullable=False),
        sa.Column("expires_at", sa.String(20), nullable=False),
        sa.Column("body", sa.Text, nullable=False),
    )
    op.create_index("ix_attest_reports_operator", "attest_reports", ["operator_id", "seq"])
    op.create_index("ix_attest_reports_account", "attest_reports", ["account", "seq"])
    rate_events_table(sa.MetaData(), "attest").create(op.get_bind())

"""the block's time (``Timestamp.Now``), for block time ranges

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25 20:20:00

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("indexer_blocks", sa.Column("timestamp", sa.BigInteger(), nullable=True))
    op.create_index("ix_indexer_blocks_timestamp", "indexer_blocks",
                    ["network_id", "timestamp"])


def downgrade() -> None:
    op.drop_index("ix_indexer_blocks_timestamp", table_name="indexer_blocks")
    op.drop_column("indexer_blocks", "timestamp")

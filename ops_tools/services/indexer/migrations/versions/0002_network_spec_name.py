"""the runtime's spec name on the network (``_metadata.specName``)

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25 17:35:00

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("indexer_networks", sa.Column("spec_name", sa.String(length=100),
                                                nullable=True))


def downgrade() -> None:
    op.drop_column("indexer_networks", "spec_name")

"""notes"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None


def upgrade() -> None:
    op.create_table("sample_notes", sa.Column("id", sa.Integer, primary_key=True),
                    sa.Column("text", sa.String(200), nullable=False))

"""the pallet indexes end with the list's whole sort key, and a pallet alone has its own, so a
page filtered by a pallet (and an event's name or an extrinsic's call) is an ordered walk of its
index range: (pallet, name, block) served a pallet alone only by reading all of its rows and
sorting them, or by a walk of the primary key that checked every row's pallet

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-27 05:50:00

"""

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: (index, table, columns before, columns after)
CHANGES = (
    ("ix_indexer_events_name", "indexer_events",
     ["network_id", "pallet", "name", "block_number"],
     ["network_id", "pallet", "name", "block_number", "idx"]),
    ("ix_indexer_extrinsics_call", "indexer_extrinsics",
     ["network_id", "pallet", "call", "block_number"],
     ["network_id", "pallet", "call", "block_number", "idx"]),
)
#: (index, table, columns): new.
ADDED = (
    ("ix_indexer_events_pallet", "indexer_events",
     ["network_id", "pallet", "block_number", "idx"]),
    ("ix_indexer_extrinsics_pallet", "indexer_extrinsics",
     ["network_id", "pallet", "block_number", "idx"]),
)


def upgrade() -> None:
    for name, table, _before, after in CHANGES:
        op.drop_index(name, table_name=table)
        op.create_index(name, table, after)
    for name, table, columns in ADDED:
        op.create_index(name, table, columns)


def downgrade() -> None:
    for name, table, _columns in ADDED:
        op.drop_index(name, table_name=table)
    for name, table, before, _after in CHANGES:
        op.drop_index(name, table_name=table)
        op.create_index(name, table, before)

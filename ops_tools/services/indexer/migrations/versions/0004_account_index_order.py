"""the account indexes end with the list's whole sort key, so a page of one account's rows is
an ordered walk of its index range (SQLite walked the primary key instead)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-27 02:20:00

"""

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: (index, table, columns before, columns after)
CHANGES = (
    ("ix_indexer_transfers_sender", "indexer_transfers",
     ["network_id", "sender", "block_number"],
     ["network_id", "sender", "block_number", "event_idx"]),
    ("ix_indexer_transfers_recipient", "indexer_transfers",
     ["network_id", "recipient", "block_number"],
     ["network_id", "recipient", "block_number", "event_idx"]),
    ("ix_indexer_heartbeats_account", "indexer_heartbeats",
     ["network_id", "account", "block_number"],
     ["network_id", "account", "block_number", "event_idx"]),
    ("ix_indexer_extrinsics_signer", "indexer_extrinsics",
     ["network_id", "signer", "block_number"],
     ["network_id", "signer", "block_number", "idx"]),
)


def upgrade() -> None:
    for name, table, _before, after in CHANGES:
        op.drop_index(name, table_name=table)
        op.create_index(name, table, after)


def downgrade() -> None:
    for name, table, before, _after in CHANGES:
        op.drop_index(name, table_name=table)
        op.create_index(name, table, before)

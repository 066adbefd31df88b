"""the drip journal (what was signed, before it is sent), the signer's lease and the salt
shared by every instance on the database"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    op.add_column("faucet_drips", sa.Column("signer", sa.String(66), nullable=True))
    op.add_column("faucet_drips", sa.Column("nonce", sa.BigInteger, nullable=True))
    op.add_column("faucet_drips", sa.Column("from_block", sa.BigInteger, nullable=True))
    op.create_table(
        "faucet_signer_leases",
        sa.Column("account", sa.String(66), primary_key=True),
        sa.Column("holder", sa.String(32), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.BigInteger, nullable=False),
        sa.Column("acquired_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
    )
    op.create_table(
        "faucet_shared",
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )

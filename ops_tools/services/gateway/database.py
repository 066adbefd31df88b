"""The gateway's database: the platform's ``Database`` with the gateway's migrations."""

from __future__ import annotations

from pathlib import Path

from ops_tools.services.common.db import Database
from ops_tools.services.common.migrations import migrate

MIGRATIONS = Path(__file__).parent / "migrations"
VERSION_TABLE = "gateway_alembic_version"


def open_database(url: str, *, pool_size: int = 20) -> Database:
    """Connect and bring the schema to the newest revision (safe with two instances)."""
    db = Database(url, pool_size=pool_size)
    migrate(db, MIGRATIONS, version_table=VERSION_TABLE)
    return db

"""Alembic migrations, run by every service at start: idempotent, and safe when several
instances start at once (one PostgreSQL advisory lock, or SQLite's write lock, around the
upgrade).

Each service keeps its migrations in its package (``<service>/migrations/env.py`` calls
:func:`run_env`; revisions in ``versions/``) and its own version table, so that services can
share one database.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import MetaData, text

from ops_tools.services.common.db import Database


def migrate(db: Database, script_location: Path, *, version_table: str,
            revision: str = "head") -> None:
    """Upgrade the service's schema to the newest revision (nothing to do when it is there);
    ``revision``: to that one instead (a test's database as an older release left it)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(script_location))
    cfg.attributes["version_table"] = version_table
    with db.engine.execution_options(net_write=True).begin() as conn:
        if db.dialect == "postgresql":
            key = hashlib.blake2b(f"migrate:{version_table}".encode(), digest_size=8).digest()
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"),
                         {"k": int.from_bytes(key, "big", signed=True)})
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def run_env(target_metadata: MetaData) -> None:
    """The body of a service's ``migrations/env.py``: migrate on the connection that
    :func:`migrate` opened, inside its transaction."""
    from alembic import context

    conn = context.config.attributes["connection"]
    context.configure(
        connection=conn,
        target_metadata=target_metadata,
        version_table=context.config.attributes["version_table"],
        render_as_batch=conn.dialect.name == "sqlite",
        transactional_ddl=True,
    )
    with context.begin_transaction():
        context.run_migrations()

"""The gateway's database engine (until the platform's ``Database`` is used)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine, event

from ops_tools.services.gateway.schema import metadata


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False},
                               pool_size=20, max_overflow=50)

        @event.listens_for(engine, "connect")
        def _pragmas(conn: Any, _record: Any) -> None:
            cur = conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        return engine
    return create_engine(url, pool_size=20, max_overflow=80, pool_pre_ping=True)


def create_tables(engine: Engine) -> None:
    metadata.create_all(engine)

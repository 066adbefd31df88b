"""Storage: one SQLAlchemy engine per service, SQLite by default, PostgreSQL by URL.

Write transactions are serialised where it matters: on SQLite a write session begins with
``BEGIN IMMEDIATE`` (one writer at a time, no lock upgrades that deadlock), and on PostgreSQL
``lock()`` takes transaction-scoped advisory locks on the keys a decision reads, so that two
instances of a service cannot both decide from the same count (rate limits, budgets).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import BigInteger, Engine, Integer, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import Session, sessionmaker

from ops_tools.errors import InputError

SQLITE_BUSY_TIMEOUT_S = 30
# The type of an autoincrementing row id: 64 bits on PostgreSQL; on SQLite only an INTEGER
# PRIMARY KEY is the rowid alias that autoincrements.
ROW_ID = BigInteger().with_variant(Integer, "sqlite")


def normalise_url(url: str) -> URL:
    """``postgresql://`` means psycopg 3 (the driver the project installs)."""
    parsed = make_url(url)
    if parsed.drivername in {"postgresql", "postgres"}:
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() not in {"sqlite", "postgresql"}:
        raise InputError(f"database_url: {parsed.drivername}: use sqlite:/// or postgresql://")
    return parsed


def redacted(url: URL | str) -> str:
    """The URL as it may be logged or shown: without its password."""
    return make_url(url).render_as_string(hide_password=True)


class Database:
    def __init__(self, url: str, *, pool_size: int = 10) -> None:
        self.url = normalise_url(url)
        self.dialect = self.url.get_backend_name()
        if self.dialect == "sqlite":
            if self.url.database and self.url.database != ":memory:":
                Path(self.url.database).parent.mkdir(parents=True, exist_ok=True)
            self.engine: Engine = create_engine(
                self.url,
                connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False},
                pool_size=pool_size,
                max_overflow=pool_size,
            )
            _sqlite_transactions(self.engine)
        else:
            self.engine = create_engine(
                self.url, pool_size=pool_size, max_overflow=pool_size * 2, pool_pre_ping=True
            )
        self._writer = self.engine.execution_options(net_write=True)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._write_sessions = sessionmaker(self._writer, expire_on_commit=False)

    @contextmanager
    def session(self, *, write: bool = False) -> Iterator[Session]:
        """A transaction: committed when the block ends, rolled back when it raises."""
        factory = self._write_sessions if write else self._sessions
        with factory() as session, session.begin():
            yield session

    def lock(self, session: Session, *keys: str) -> None:
        """Serialise decisions about ``keys`` until the transaction ends (PostgreSQL advisory
        locks, taken in sorted order so two sessions never wait on each other; on SQLite the
        write session already holds the database's one write lock)."""
        if self.dialect != "postgresql":
            return
        for key in sorted(set(keys)):
            digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
            session.execute(text("SELECT pg_advisory_xact_lock(:k)"),
                            {"k": int.from_bytes(digest, "big", signed=True)})

    def ping(self) -> None:
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    def dispose(self) -> None:
        self.engine.dispose()

    def __repr__(self) -> str:
        return f"Database({redacted(self.url)})"


def _sqlite_transactions(engine: Engine) -> None:
    # pysqlite's own transaction handling begins lazily and never IMMEDIATE; take it over (the
    # recipe of SQLAlchemy's SQLite documentation) so write sessions lock up front.
    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_S * 1000}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        write = conn.get_execution_options().get("net_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

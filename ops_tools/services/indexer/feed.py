"""The API's signal that the processor committed: subscriptions wait on it, then read what is
new. The processor is another process, so the signal crosses the database:

- PostgreSQL: the processor's status write sends ``NOTIFY indexer_commit`` in its transaction
  (delivered at the commit); the API LISTENs on one connection of its own;
- SQLite, which has no notifications between processes: ``PRAGMA data_version`` on a connection
  of the API's own, a counter in memory that moves on every commit by another connection, read
  every ``SQLITE_POLL_S`` (no table is read) while a subscription waits. With none, nothing is
  read: an idle indexer costs nothing, and the first wait after a pause compares the counter
  with its last reading, so a commit made meanwhile still wakes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3

import psycopg

from ops_tools.services.common.db import Database

log = logging.getLogger(__name__)

CHANNEL = "indexer_commit"
SQLITE_POLL_S = 0.05
RECONNECT_S = 1.0


class CommitFeed:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.version = 0
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._waiting = 0
        self._wanted = asyncio.Event()  # set while a subscription waits (SQLite's poll)

    def start(self) -> None:
        run = self._listen if self.db.dialect == "postgresql" else self._poll_sqlite
        self._task = asyncio.create_task(run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def wait(self, seen: int, timeout: float) -> int:
        """The feed's version once it differs from ``seen`` (or after ``timeout``)."""
        self._waiting += 1
        self._wanted.set()
        try:
            async with self._changed:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait_for(lambda: self.version != seen),
                                           timeout)
                return self.version
        finally:
            self._waiting -= 1
            if not self._waiting:
                self._wanted.clear()

    async def _bump(self) -> None:
        async with self._changed:
            self.version += 1
            self._changed.notify_all()

    async def _listen(self) -> None:
        conninfo = self.db.url.set(drivername="postgresql").render_as_string(
            hide_password=False)
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
                async with conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    await self._bump()  # commits missed while (re)connecting
                    async for _ in conn.notifies():
                        await self._bump()
            except (psycopg.Error, OSError) as exc:
                log.warning("indexer: listening for commits failed (%s); again in %.0f s",
                            type(exc).__name__, RECONNECT_S)
                await asyncio.sleep(RECONNECT_S)

    async def _poll_sqlite(self) -> None:
        conn = sqlite3.connect(self.db.url.database or ":memory:", check_same_thread=False)
        try:
            seen = None
            while True:
                await self._wanted.wait()
                version = await asyncio.to_thread(
                    lambda: conn.execute("PRAGMA data_version").fetchone()[0])
                if version != seen:
                    seen = version
                    await self._bump()
                await asyncio.sleep(SQLITE_POLL_S)
        finally:
            conn.close()

"""The node's database: blocks, per-block state, the canonical chain and heads, in SQLite.

Each block is written in one transaction together with its state and the new heads, so a kill
at any moment leaves either the block fully there or not at all (WAL journal).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ops_tools.chainspec.scale import Reader, encode_bytes
from ops_tools.errors import OpsError

SCHEMA = """
CREATE TABLE IF NOT EXISTS blocks (hash BLOB PRIMARY KEY, number INTEGER NOT NULL,
                                   parent BLOB NOT NULL,
                                   header BLOB NOT NULL, body BLOB NOT NULL, justification BLOB);
CREATE TABLE IF NOT EXISTS states (hash BLOB PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS canon (number INTEGER PRIMARY KEY, hash BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
"""


def encode_state(state: dict[bytes, bytes]) -> bytes:
    # Uncompressed: a few KiB per block; compressing cost more than it saved at sync speed.
    return b"".join(encode_bytes(k) + encode_bytes(v) for k, v in sorted(state.items()))


def decode_state(blob: bytes) -> dict[bytes, bytes]:
    r = Reader(blob, "stored state")
    out: dict[bytes, bytes] = {}
    while r.remaining():
        key = r.bytes_vec("key")
        out[key] = r.bytes_vec("value")
    return out


class Database:
    def __init__(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        try:
            self.conn = sqlite3.connect(path / "chain.sqlite", isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.executescript(SCHEMA)
        except sqlite3.Error as exc:
            raise OpsError(
                f"database {path}: cannot open it: {exc}; remove it with purge-chain"
            ) from None

    def close(self) -> None:
        self.conn.close()

    def meta(self, key: str) -> bytes | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return bytes(row[0]) if row else None

    def insert_block(
        self,
        hash_: bytes,
        number: int,
        parent: bytes,
        header: bytes,
        body: bytes,
        state: dict[bytes, bytes],
        canon_updates: dict[int, bytes],
        canon_truncate: int | None,
        meta: dict[str, bytes],
    ) -> None:
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            c.execute(
                "INSERT OR IGNORE INTO blocks VALUES (?, ?, ?, ?, ?, NULL)",
                (hash_, number, parent, header, body),
            )
            c.execute("INSERT OR IGNORE INTO states VALUES (?, ?)", (hash_, encode_state(state)))
            if canon_truncate is not None:
                c.execute("DELETE FROM canon WHERE number > ?", (canon_truncate,))
            c.executemany("INSERT OR REPLACE INTO canon VALUES (?, ?)", list(canon_updates.items()))
            c.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", list(meta.items()))
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise

    def set_meta(
        self, values: dict[str, bytes], justification: tuple[bytes, bytes] | None = None
    ) -> None:
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            c.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", list(values.items()))
            if justification is not None:
                c.execute(
                    "UPDATE blocks SET justification = ? WHERE hash = ?",
                    (justification[1], justification[0]),
                )
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise

    def block(self, hash_: bytes) -> tuple[int, bytes, bytes, bytes, bytes | None] | None:
        """(number, parent, header, body, justification)."""
        row = self.conn.execute(
            "SELECT number, parent, header, body, justification FROM blocks WHERE hash = ?",
            (hash_,),
        ).fetchone()
        if row is None:
            return None
        return (
            row[0],
            bytes(row[1]),
            bytes(row[2]),
            bytes(row[3]),
            bytes(row[4]) if row[4] else None,
        )

    def has_block(self, hash_: bytes) -> bool:
        return (
            self.conn.execute("SELECT 1 FROM blocks WHERE hash = ?", (hash_,)).fetchone()
            is not None
        )

    def state(self, hash_: bytes) -> dict[bytes, bytes] | None:
        row = self.conn.execute("SELECT data FROM states WHERE hash = ?", (hash_,)).fetchone()
        return decode_state(bytes(row[0])) if row else None

    def canon_hash(self, number: int) -> bytes | None:
        row = self.conn.execute("SELECT hash FROM canon WHERE number = ?", (number,)).fetchone()
        return bytes(row[0]) if row else None

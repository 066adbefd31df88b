"""Reports in the service's database (``attest_`` tables), newest first with a stable cursor.

The report is stored as its exact JSON text, next to the columns it is searched by; the
sequence number orders the listing, so a page boundary never moves when reports are added.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Column,
    Index,
    MetaData,
    String,
    Table,
    Text,
    insert,
    select,
)

from ops_tools.services.common.db import ROW_ID, Database
from ops_tools.services.common.ratelimit import rate_events_table
from ops_tools.services.common.salt import shared_table

PREFIX = "attest"
metadata = MetaData()
reports = Table(
    f"{PREFIX}_reports",
    metadata,
    Column("seq", ROW_ID, primary_key=True,
           autoincrement=True),
    Column("hash", String(66), nullable=False, unique=True),
    Column("operator_id", String(64), nullable=False),
    Column("account", String(64), nullable=True),
    Column("genesis_hash", String(66), nullable=False),
    Column("issued_at", String(20), nullable=False),
    Column("expires_at", String(20), nullable=False),
    Column("body", Text, nullable=False),
    Index(f"ix_{PREFIX}_reports_operator", "operator_id", "seq"),
    Index(f"ix_{PREFIX}_reports_account", "account", "seq"),
)
rate_events = rate_events_table(metadata, PREFIX)
# The limits' salt, one for every instance on the database (common/salt.py).
shared = shared_table(metadata, PREFIX)


@dataclass(frozen=True)
class Summary:
    seq: int
    hash: str
    operator_id: str
    account: str | None
    genesis_hash: str
    issued_at: str
    expires_at: str

    def to_json(self, current_genesis: str | None) -> dict[str, Any]:
        return {
            "hash": self.hash,
            "operator_id": self.operator_id,
            "account": self.account,
            "genesis_hash": self.genesis_hash,
            "issued_at": self.issued_at,
            "expires_at": self.expires_at,
            "earlier_network": current_genesis is not None
            and self.genesis_hash != current_genesis,
        }


class ReportStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def add(self, report: dict[str, Any]) -> None:
        with self.db.session(write=True) as s:
            s.execute(insert(reports).values(
                hash=report["hash"],
                operator_id=report["operator_id"],
                account=report["account"],
                genesis_hash=report["genesis_hash"],
                issued_at=report["issued_at"],
                expires_at=report["expires_at"],
                body=json.dumps(report, ensure_ascii=False, separators=(",", ":")),
            ))

    def get(self, report_hash: str) -> dict[str, Any] | None:
        with self.db.session() as s:
            body = s.scalar(select(reports.c.body).where(reports.c.hash == report_hash))
        return None if body is None else json.loads(body)

    def page(self, *, operator_id: str | None = None, account: str | None = None,
             limit: int = 20, before: int | None = None) -> tuple[list[Summary], str | None]:
        """Newest first; the cursor is the sequence number of the last row handed out."""
        cols = [reports.c.seq, reports.c.hash, reports.c.operator_id, reports.c.account,
                reports.c.genesis_hash, reports.c.issued_at, reports.c.expires_at]
        query = select(*cols).order_by(reports.c.seq.desc()).limit(limit + 1)
        if operator_id is not None:
            query = query.where(reports.c.operator_id == operator_id)
        if account is not None:
            query = query.where(reports.c.account == account)
        if before is not None:
            query = query.where(reports.c.seq < before)
        with self.db.session() as s:
            rows = [Summary(*row) for row in s.execute(query)]
        more = len(rows) > limit
        rows = rows[:limit]
        return rows, (str(rows[-1].seq) if more and rows else None)

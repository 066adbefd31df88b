"""The faucet's ledger: every drip with its outcome, and the rate-limit events, per genesis.

Addresses, client IPs and idempotency keys are stored only as salted hashes. Every row carries
the genesis hash of the network it happened on: after a reset the new network starts with no
history for its limits, and the old rows stay, marked.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    Index,
    MetaData,
    String,
    Table,
    Text,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from ops_tools.services.common.db import ROW_ID, Database
from ops_tools.services.common.ratelimit import rate_events_table

PREFIX = "faucet"
VERSION_TABLE = "faucet_alembic_version"
metadata = MetaData()
rate_events = rate_events_table(metadata, PREFIX)
drips = Table(
    "faucet_drips",
    metadata,
    Column("id", ROW_ID, primary_key=True,
           autoincrement=True),
    Column("genesis", String(66), nullable=False),
    Column("recipient_hash", String(64), nullable=False),
    Column("client_hash", String(64), nullable=False),
    Column("idempotency_hash", String(64), nullable=True),
    Column("reservation", String(32), nullable=True),
    Column("amount", BigInteger, nullable=False),
    # pending -> included | failed | unknown (submitted, inclusion not seen in time)
    Column("status", String(12), nullable=False),
    Column("extrinsic_hash", String(66), nullable=True),
    Column("block_hash", String(66), nullable=True),
    Column("block_number", BigInteger, nullable=True),
    Column("error_code", String(40), nullable=True),
    Column("response", Text, nullable=True),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Index("ux_faucet_drips_idempotency", "genesis", "idempotency_hash", unique=True),
    Index("ix_faucet_drips_genesis_status", "genesis", "status"),
)


@dataclass(frozen=True)
class DripRow:
    id: int
    recipient_hash: str
    status: str
    response: dict[str, Any] | None
    extrinsic_hash: str | None
    error_code: str | None


class Ledger:
    def __init__(self, db: Database) -> None:
        self.db = db

    def open(self, genesis: str, recipient_hash: str, client_hash: str, amount: int,
             idempotency_hash: str | None) -> DripRow | int:
        """A new pending drip (its id), or the earlier drip that holds the idempotency key."""
        now = time.time()
        try:
            with self.db.session(write=True) as s:
                return int(s.execute(insert(drips).values(
                    genesis=genesis, recipient_hash=recipient_hash, client_hash=client_hash,
                    idempotency_hash=idempotency_hash, amount=amount, status="pending",
                    created_at=now, updated_at=now,
                )).inserted_primary_key[0])
        except IntegrityError:
            if idempotency_hash is None:
                raise
        existing = self.by_idempotency(genesis, idempotency_hash)
        if existing is None:  # removed between the insert and the read: a refused request
            return self.open(genesis, recipient_hash, client_hash, amount, idempotency_hash)
        return existing

    def by_idempotency(self, genesis: str, idempotency_hash: str) -> DripRow | None:
        with self.db.session() as s:
            row = s.execute(select(drips).where(
                drips.c.genesis == genesis, drips.c.idempotency_hash == idempotency_hash,
            )).first()
        if row is None:
            return None
        return DripRow(
            id=int(row.id), recipient_hash=row.recipient_hash, status=row.status,
            response=json.loads(row.response) if row.response else None,
            extrinsic_hash=row.extrinsic_hash, error_code=row.error_code,
        )

    def update(self, drip_id: int, **values: Any) -> None:
        if "response" in values and values["response"] is not None:
            values["response"] = json.dumps(values["response"], sort_keys=True)
        with self.db.session(write=True) as s:
            s.execute(update(drips).where(drips.c.id == drip_id)
                      .values(updated_at=time.time(), **values))

    def discard(self, drip_id: int) -> None:
        """A request refused before anything was submitted leaves no drip behind (its
        idempotency key is free again, and a retry is judged afresh)."""
        with self.db.session(write=True) as s:
            s.execute(delete(drips).where(drips.c.id == drip_id))

    def counts(self, genesis: str) -> dict[str, int]:
        with self.db.session() as s:
            rows = s.execute(select(drips.c.status, func.count()).where(
                drips.c.genesis == genesis).group_by(drips.c.status)).all()
        return {str(status): int(n) for status, n in rows}

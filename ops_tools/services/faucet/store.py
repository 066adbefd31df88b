"""The faucet's ledger: every drip with its outcome, and the rate-limit events, per genesis;
the signer's lease and the salt shared by every instance on the database.

Addresses, client IPs and idempotency keys are stored only as salted hashes. Every row carries
the genesis hash of the network it happened on: after a reset the new network starts with no
history for its limits, and the old rows stay, marked. A drip is journaled (signer, nonce,
extrinsic hash, best block; not the signed bytes, which hold the recipient's account in clear)
before it is sent, so whatever happens to the request or the process, the outcome can be
settled against the chain.
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
from ops_tools.services.common.salt import database_salt, shared_table

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
    # pending (nothing signed) -> submitted (signed and journaled, then sent) -> included |
    # failed (in a block, dispatch failed) | dropped (its nonce went to another transaction:
    # never applied) | unknown (followed for ticket_ttl_s without an answer)
    Column("status", String(12), nullable=False),
    Column("extrinsic_hash", String(66), nullable=True),
    Column("signer", String(66), nullable=True),
    Column("nonce", BigInteger, nullable=True),
    Column("from_block", BigInteger, nullable=True),
    Column("block_hash", String(66), nullable=True),
    Column("block_number", BigInteger, nullable=True),
    Column("error_code", String(40), nullable=True),
    Column("response", Text, nullable=True),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Index("ux_faucet_drips_idempotency", "genesis", "idempotency_hash", unique=True),
    Index("ix_faucet_drips_genesis_status", "genesis", "status"),
)
# One row per signing account: the instance that may sign with it, until ``expires_at``.
signer_leases = Table(
    "faucet_signer_leases",
    metadata,
    Column("account", String(66), primary_key=True),
    Column("holder", String(32), nullable=False),
    Column("host", String(255), nullable=False),
    Column("pid", BigInteger, nullable=False),
    Column("acquired_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
)
# Values every instance on the database shares (the salt of the limits' hashes).
shared = shared_table(metadata, "faucet")


@dataclass(frozen=True)
class DripRow:
    id: int
    recipient_hash: str
    status: str
    response: dict[str, Any] | None
    extrinsic_hash: str | None
    error_code: str | None
    created_at: float = 0.0
    reservation: str | None = None
    nonce: int | None = None
    from_block: int | None = None


def _row(row: Any) -> DripRow:
    return DripRow(
        id=int(row.id), recipient_hash=row.recipient_hash, status=row.status,
        response=json.loads(row.response) if row.response else None,
        extrinsic_hash=row.extrinsic_hash, error_code=row.error_code,
        created_at=float(row.created_at), reservation=row.reservation,
        nonce=None if row.nonce is None else int(row.nonce),
        from_block=None if row.from_block is None else int(row.from_block),
    )


class Pruned(Exception):
    """The drip's row is gone (pruned as abandoned): nothing may be sent for it."""


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
        return None if row is None else _row(row)

    def get(self, drip_id: int) -> DripRow | None:
        with self.db.session() as s:
            row = s.execute(select(drips).where(drips.c.id == drip_id)).first()
        return None if row is None else _row(row)

    def journal(self, drip_id: int, *, signer: str, reservation: str, extrinsic_hash: str,
                nonce: int, from_block: int) -> None:
        """What is about to be sent; ``Pruned`` when the row was pruned as abandoned."""
        with self.db.session(write=True) as s:
            # "submitted" too: a nonce refused by the pool is signed again with the next one.
            done = s.execute(update(drips).where(drips.c.id == drip_id,
                                                 drips.c.status.in_(("pending", "submitted")))
                             .values(
                status="submitted", signer=signer, reservation=reservation,
                extrinsic_hash=extrinsic_hash, nonce=nonce, from_block=from_block,
                updated_at=time.time()))
            if done.rowcount != 1:
                raise Pruned(f"drip {drip_id} is no longer pending")

    def submitted(self, genesis: str, signer: str) -> list[DripRow]:
        """Drips of this signer sent and not settled (by an earlier run of the faucet)."""
        with self.db.session() as s:
            rows = s.execute(select(drips).where(
                drips.c.genesis == genesis, drips.c.signer == signer,
                drips.c.status == "submitted").order_by(drips.c.id)).all()
        return [_row(r) for r in rows]

    def never_applied(self, genesis: str, signer: str) -> list[DripRow]:
        """Drips of ``signer`` whose fate was unknown (their ticket expired) and whose nonce a
        later drip of the same signer has since used in a block: a nonce applies once, so they
        never will. They become ``dropped`` and free their idempotency key; the caller releases
        their reservations (the recipient got nothing)."""
        used = select(drips.c.nonce).where(
            drips.c.genesis == genesis, drips.c.signer == signer,
            drips.c.status.in_(("included", "failed")))
        with self.db.session(write=True) as s:
            rows = s.execute(select(drips).where(
                drips.c.genesis == genesis, drips.c.signer == signer,
                drips.c.status == "unknown", drips.c.nonce.in_(used))).all()
            if rows:
                s.execute(update(drips).where(drips.c.id.in_([r.id for r in rows]))
                          .values(status="dropped", idempotency_hash=None,
                                  error_code="nonce_used", updated_at=time.time()))
        return [_row(r) for r in rows]

    def prune_pending(self, older_than: float) -> int:
        """Forget drips that never got as far as being signed (their request died): their
        idempotency keys are free again. Their limit reservations stay counted."""
        with self.db.session(write=True) as s:
            return int(s.execute(delete(drips).where(
                drips.c.status == "pending", drips.c.created_at < older_than)).rowcount)

    def shared_salt(self, legacy: bytes | None = None) -> bytes:
        """The salt every instance on this database uses, created once (from ``legacy``, the
        per-instance salt file of earlier versions, when there is one: its limits and
        idempotency keys stay valid)."""
        return database_salt(self.db, shared, legacy)

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

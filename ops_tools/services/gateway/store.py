"""Keys, budget reservations, rate windows, receipts, workers and heartbeats in the database.

Everything that two gateway instances must agree on lives here; each function is one short
transaction. The budget reservation is a single conditional UPDATE, so concurrent requests of
one key (on one instance or several) cannot reserve past the budget: PostgreSQL re-checks the
WHERE clause on the row version it locks, SQLite serialises writers.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Engine, delete, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite

from ops_tools.services.gateway.schema import (
    api_keys,
    heartbeats,
    operator_conduct,
    receipts,
    settlements,
    workers,
)

KEY_PREFIX = "sk-net-test-"


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


@dataclass(frozen=True)
class Opening:
    """The receipt a reservation opens (settle_status ``open`` until the request ends)."""

    request_id: str
    model: str
    kind: str
    genesis_hash: str


@dataclass(frozen=True)
class Reservation:
    key_id: int
    account: str
    amount: int
    rpm: int | None
    tpm: int | None
    window: int
    opening: Opening


class KeyRejected(Exception):
    """reason: ``invalid`` | ``budget`` | ``rpm`` | ``tpm``; limit and retry_after for 429s."""

    def __init__(self, reason: str, limit: int = 0, retry_after: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.limit = limit
        self.retry_after = retry_after


def _w(engine: Engine) -> Engine:
    """Writes that decide (SQLite: ``BEGIN IMMEDIATE``, so the busy timeout applies up front)."""
    return engine.execution_options(net_write=True)  # type: ignore[return-value]


def _upsert(engine: Engine, table: Any) -> Any:
    return (postgresql.insert if engine.dialect.name == "postgresql" else sqlite.insert)(table)


# --- keys ------------------------------------------------------------------------------------
def create_key(
    engine: Engine, account: str, *, budget: int | None, rpm: int | None, tpm: int | None,
    label: str | None = None, key: str | None = None,
) -> tuple[str, int]:
    key = key or new_key()
    with _w(engine).begin() as conn:
        key_id = conn.execute(
            insert(api_keys).values(
                key_hash=hash_key(key), key_prefix=key[: len(KEY_PREFIX) + 4], account=account,
                budget=budget, spent=0, reserved=0, rpm=rpm, tpm=tpm, label=label,
                created_at=time.time(),
            ).returning(api_keys.c.id)
        ).scalar_one()
    return key, key_id


def ensure_key(engine: Engine, key: str, account: str) -> bool:
    """Create ``key`` for ``account`` unless its hash is on record (revoked or not); True when
    created. Two instances starting at once: the unique hash makes one of them a no-op."""
    stmt = _upsert(engine, api_keys).values(
        key_hash=hash_key(key), key_prefix=key[: len(KEY_PREFIX) + 4], account=account,
        budget=None, spent=0, reserved=0, rpm=None, tpm=None, label="development key",
        created_at=time.time(),
    ).on_conflict_do_nothing(index_elements=["key_hash"]).returning(api_keys.c.id)
    with _w(engine).begin() as conn:
        return conn.execute(stmt).first() is not None


def key_exists(engine: Engine, key: str) -> bool:
    with engine.connect() as conn:
        return conn.execute(
            select(api_keys.c.id).where(api_keys.c.key_hash == hash_key(key),
                                        api_keys.c.revoked_at.is_(None))
        ).first() is not None


def list_keys(engine: Engine) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(select(api_keys).order_by(api_keys.c.id)).mappings().all()
    return [
        {k: row[k] for k in ("id", "key_prefix", "account", "budget", "spent", "reserved", "rpm",
                             "tpm", "label", "created_at", "revoked_at")}
        for row in rows
    ]


def revoke_key(engine: Engine, key_id: int) -> bool:
    with _w(engine).begin() as conn:
        result = conn.execute(
            update(api_keys).where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
            .values(revoked_at=time.time())
        )
    return result.rowcount == 1


# --- the hot path ----------------------------------------------------------------------------
# Every inference request runs these two transactions. They are plain SQL on a pooled DBAPI
# connection: SQLAlchemy's statement construction, cache-key generation and result processing
# cost about 0.9 ms a transaction here, the statements themselves about 0.05 ms. The semantics
# are those of the expression versions they replaced (tests/services/gateway/test_store.py).
_RESERVE = (
    "UPDATE gateway_api_keys SET reserved = reserved + {p}"
    " WHERE key_hash = {p} AND revoked_at IS NULL"
    " AND (budget IS NULL OR spent + reserved + {p} <= budget)"
    " RETURNING id, account, rpm, tpm"
)
_KNOWN = "SELECT id FROM gateway_api_keys WHERE key_hash = {p} AND revoked_at IS NULL"
# "window" is a keyword in both dialects.
_COUNT = (
    'INSERT INTO gateway_rate_windows (key_id, "window", requests, tokens) VALUES ({p}, {p}, 1, 0)'
    ' ON CONFLICT (key_id, "window") DO UPDATE SET requests = gateway_rate_windows.requests + 1'
    " RETURNING requests, tokens"
)
_RELEASE = (
    "UPDATE gateway_api_keys SET reserved = reserved - {p}, spent = spent + {p} WHERE id = {p}"
)
_OPEN = (
    "INSERT INTO gateway_receipts (id, key_id, payer, model, kind, input_tokens, output_tokens,"
    " cost, reserved, status, genesis_hash, created_at, settle_status)"
    " VALUES ({p}, {p}, {p}, {p}, {p}, 0, 0, 0, {p}, 'open', {p}, {p}, 'open')"
)
RECEIPT_FIELDS = (
    "operator", "worker", "input_tokens", "output_tokens", "cost", "status", "error",
    "usage_discrepancy",
)
# Guarded by ``open``: a receipt the reconciler already closed is not charged a second time.
_CLOSE = (
    "UPDATE gateway_receipts SET operator = {p}, worker = {p}, input_tokens = {p},"
    " output_tokens = {p}, cost = {p}, status = {p}, error = {p}, usage_discrepancy = {p},"
    " settle_status = 'pending' WHERE id = {p} AND settle_status = 'open'"
)
_MISREPORT = (
    "INSERT INTO gateway_operator_conduct (operator, genesis_hash, misreports, last_reason,"
    " last_at) VALUES ({p}, {p}, 1, {p}, {p}) ON CONFLICT (operator, genesis_hash) DO UPDATE"
    " SET misreports = gateway_operator_conduct.misreports + 1,"
    " last_reason = excluded.last_reason, last_at = excluded.last_at"
)
_TOKENS = (
    'UPDATE gateway_rate_windows SET tokens = tokens + {p} WHERE key_id = {p} AND "window" = {p}'
)


def _sql(engine: Engine, template: str) -> str:
    return template.replace("{p}", "%s" if engine.dialect.name == "postgresql" else "?")


class _Tx:
    """One write transaction on a raw pooled connection (SQLite: ``BEGIN IMMEDIATE``, as
    ``_w`` does for the expression API; the pool's connections run in autocommit mode)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def __enter__(self) -> Any:
        self.conn = self.engine.raw_connection()
        self.cursor = self.conn.cursor()
        if self.engine.dialect.name == "sqlite":
            try:
                self.cursor.execute("BEGIN IMMEDIATE")
            except BaseException:  # (busy): the connection goes back to the pool all the same
                self.cursor.close()
                self.conn.close()
                raise
        return self.cursor

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        try:
            if kind is None:
                self.conn.commit()
            else:
                self.conn.rollback()
        finally:
            self.cursor.close()
            self.conn.close()  # back to the pool


def reserve(engine: Engine, key: str, amount: int, now: float, opening: Opening) -> Reservation:
    """Reserve ``amount`` plancks of the key's budget, count the request in its window and open
    its receipt, in one transaction."""
    window = int(now // 60)
    key_hash = hash_key(key)
    with _Tx(engine) as cur:
        cur.execute(_sql(engine, _RESERVE), (amount, key_hash, amount))
        row = cur.fetchone()
        if row is None:
            cur.execute(_sql(engine, _KNOWN), (key_hash,))
            known = cur.fetchone()
            raise KeyRejected("budget" if known else "invalid", retry_after=3600)
        key_id, account, rpm, tpm = row
        if rpm is not None or tpm is not None:
            cur.execute(_sql(engine, _COUNT), (key_id, window))
            requests, tokens = cur.fetchone()
            retry = max(1, int(60 - now % 60) + 1)
            if rpm is not None and requests > rpm:
                raise KeyRejected("rpm", rpm, retry)
            if tpm is not None and tokens >= tpm:
                raise KeyRejected("tpm", tpm, retry)
        cur.execute(_sql(engine, _OPEN), (opening.request_id, key_id, account, opening.model,
                                          opening.kind, amount, opening.genesis_hash, now))
    return Reservation(key_id, account, amount, rpm, tpm, window, opening)


def settle_request(engine: Engine, reservation: Reservation, receipt: dict[str, Any]) -> bool:
    """Close the receipt, release the reservation and charge the actual cost, atomically; count
    a usage discrepancy against the operator. False when the receipt was no longer open (the
    reconciler closed it): nothing is charged or released twice."""
    opening = reservation.opening
    with _Tx(engine) as cur:
        cur.execute(_sql(engine, _CLOSE),
                    (*(receipt[f] for f in RECEIPT_FIELDS), opening.request_id))
        if cur.rowcount != 1:
            return False
        cur.execute(_sql(engine, _RELEASE),
                    (reservation.amount, receipt["cost"], reservation.key_id))
        if reservation.tpm is not None:
            used = receipt["input_tokens"] + receipt["output_tokens"]
            cur.execute(_sql(engine, _TOKENS), (used, reservation.key_id, reservation.window))
        if receipt["usage_discrepancy"] and receipt["operator"]:
            cur.execute(_sql(engine, _MISREPORT), (
                receipt["operator"], opening.genesis_hash, receipt["usage_discrepancy"],
                time.time()))
    return True


def reconcile_open(engine: Engine, older_than: float) -> int:
    """Close the receipts of requests that a gateway lost (opened before ``older_than``, the
    longest a request can live, and still open: its process crashed, or its final write
    failed) and release their reservations. Nothing is charged: the gateway cannot tell what
    was delivered. Returns how many it closed."""
    closed = 0
    with _w(engine).begin() as conn:
        rows = conn.execute(
            select(receipts.c.id, receipts.c.key_id, receipts.c.reserved).where(
                receipts.c.settle_status == "open", receipts.c.created_at < older_than)
        ).all()
        for rid, key_id, reserved in rows:
            done = conn.execute(
                update(receipts).where(receipts.c.id == rid, receipts.c.settle_status == "open")
                .values(status="failed", cost=0, settle_status="pending",
                        error="the gateway lost this request; reconciled: nothing charged,"
                              " the reservation released")
            ).rowcount
            if done:
                conn.execute(update(api_keys).where(api_keys.c.id == key_id)
                             .values(reserved=api_keys.c.reserved - reserved))
                closed += 1
    return closed


def misreporting_operators(engine: Engine, genesis_hash: str) -> list[dict[str, Any]]:
    """Every operator with usage misreports on this network: count, latest reason and time."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(operator_conduct).where(operator_conduct.c.genesis_hash == genesis_hash)
        ).mappings().all()
    return [dict(r) for r in rows]


def usage(engine: Engine, key: str, limit: int = 100) -> dict[str, Any] | None:
    with engine.connect() as conn:
        row = conn.execute(
            select(api_keys).where(api_keys.c.key_hash == hash_key(key),
                                   api_keys.c.revoked_at.is_(None))
        ).mappings().first()
        if row is None:
            return None
        rows = conn.execute(
            select(receipts).where(receipts.c.key_id == row["id"])
            .order_by(receipts.c.created_at.desc()).limit(limit)
        ).mappings().all()
    return {
        "object": "usage",
        "account": row["account"],
        "budget": row["budget"],
        "spent": row["spent"],
        "reserved": row["reserved"],
        "rpm": row["rpm"],
        "tpm": row["tpm"],
        "receipts": [receipt_json(r) for r in rows],
    }


def receipt_json(row: Any) -> dict[str, Any]:
    return {
        "id": row["id"], "payer": row["payer"], "operator": row["operator"],
        "model": row["model"], "kind": row["kind"], "input_tokens": row["input_tokens"],
        "output_tokens": row["output_tokens"], "cost": row["cost"], "status": row["status"],
        "error": row["error"], "genesis_hash": row["genesis_hash"],
        "created_at": row["created_at"], "settle_status": row["settle_status"],
        "settled_extrinsic": row["settled_extrinsic"], "settled_block": row["settled_block"],
        "usage_discrepancy": row["usage_discrepancy"],
    }


def get_receipt(engine: Engine, request_id: str) -> dict[str, Any] | None:
    with engine.connect() as conn:
        row = conn.execute(select(receipts).where(receipts.c.id == request_id)).mappings().first()
    return receipt_json(row) if row else None


# --- workers and heartbeats ------------------------------------------------------------------
class TooManyWorkers(Exception):
    """The operator already has its cap of live announced workers."""

    def __init__(self, count: int) -> None:
        super().__init__(count)
        self.count = count


def save_worker(engine: Engine, payload: dict[str, Any], now: float, *, max_per_operator: int,
                ttl_s: float) -> str:
    """Store (or renew) an admitted worker; forget every worker not announced within ``ttl_s``.

    Raises ``TooManyWorkers`` when this is a new worker and its operator already has
    ``max_per_operator`` live ones: one transaction, so concurrent announcements (on one
    instance or several) cannot pass the cap together.
    """
    worker_id = f"{payload['operator']}@{payload['endpoint']}"
    values = {
        "operator": payload["operator"], "endpoint": payload["endpoint"],
        "models": orjson.dumps(payload["models"]).decode(), "capacity": payload["capacity"],
        "genesis_hash": payload["genesis_hash"], "announced_at": now,
    }
    stmt = _upsert(engine, workers).values(worker_id=worker_id, **values)
    with _w(engine).begin() as conn:
        conn.execute(delete(workers).where(workers.c.announced_at < now - ttl_s))
        others = conn.execute(
            select(func.count()).select_from(workers).where(
                workers.c.operator == payload["operator"],
                workers.c.genesis_hash == payload["genesis_hash"],
                workers.c.worker_id != worker_id)
        ).scalar_one()
        if others >= max_per_operator:
            raise TooManyWorkers(int(others))
        conn.execute(stmt.on_conflict_do_update(index_elements=["worker_id"], set_=values))
    return worker_id


def save_heartbeat(engine: Engine, payload: dict[str, Any], now: float) -> int:
    """Keep the highest epoch per operator; returns the epoch now on record."""
    values = {"epoch": payload["epoch"], "timestamp": payload["timestamp"], "received_at": now}
    stmt = _upsert(engine, heartbeats).values(
        operator=payload["operator"], genesis_hash=payload["genesis_hash"], **values
    )
    stmt = stmt.on_conflict_do_update(
        index_elements=["operator", "genesis_hash"], set_=values,
        where=heartbeats.c.epoch <= payload["epoch"],
    )
    with _w(engine).begin() as conn:
        conn.execute(stmt)
        return int(conn.execute(
            select(heartbeats.c.epoch).where(heartbeats.c.operator == payload["operator"],
                                             heartbeats.c.genesis_hash == payload["genesis_hash"])
        ).scalar_one())


def load_registry(
    engine: Engine, genesis_hash: str, announced_since: float
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The workers announced since ``announced_since`` and the operators' heartbeat epochs."""
    with engine.connect() as conn:
        ws = conn.execute(
            select(workers).where(workers.c.genesis_hash == genesis_hash,
                                  workers.c.announced_at >= announced_since)
        ).mappings().all()
        hbs = conn.execute(
            select(heartbeats.c.operator, heartbeats.c.epoch)
            .where(heartbeats.c.genesis_hash == genesis_hash)
        ).all()
    out = [{**w, "models": orjson.loads(w["models"])} for w in ws]
    return out, {op: int(epoch) for op, epoch in hbs}


def forget_other_networks(engine: Engine, genesis_hash: str) -> dict[str, int]:
    """A reset: drop workers and heartbeats of other networks; close their unsettled receipts.

    The old chain is gone, so its receipts can no longer be settled; they stay, marked with their
    genesis hash and ``closed``.
    """
    with _w(engine).begin() as conn:
        w = conn.execute(delete(workers).where(workers.c.genesis_hash != genesis_hash)).rowcount
        h = conn.execute(
            delete(heartbeats).where(heartbeats.c.genesis_hash != genesis_hash)
        ).rowcount
        r = conn.execute(
            update(receipts)
            .where(receipts.c.genesis_hash != genesis_hash,
                   receipts.c.settle_status.in_(("pending", "claimed")))
            .values(settle_status="closed")
        ).rowcount
    return {"workers": w, "heartbeats": h, "receipts_closed": r}


# --- settlement ------------------------------------------------------------------------------
def settlement_backlog(engine: Engine, genesis_hash: str) -> int:
    """Paid receipts of this network not settled yet (pending or claimed by a settlement)."""
    with engine.connect() as conn:
        return int(conn.execute(
            select(func.count()).select_from(receipts).where(
                receipts.c.settle_status.in_(("pending", "claimed")),
                receipts.c.genesis_hash == genesis_hash, receipts.c.cost > 0)
        ).scalar_one())


def claim_for_settlement(engine: Engine, genesis_hash: str) -> list[tuple[int, str, int, int]]:
    """Claim every pending paid receipt, one settlement row per operator.

    Returns (settlement id, operator, amount, receipt count). Claiming is one UPDATE per
    operator guarded by ``settle_status = 'pending'``, so two instances never claim the same
    receipt.
    """
    out = []
    with _w(engine).begin() as conn:
        operators = conn.execute(
            select(receipts.c.operator).where(
                receipts.c.settle_status == "pending", receipts.c.genesis_hash == genesis_hash,
                receipts.c.cost > 0, receipts.c.operator.is_not(None),
            ).distinct()
        ).scalars().all()
    for operator in operators:
        with _w(engine).begin() as conn:
            sid = conn.execute(
                insert(settlements).values(
                    operator=operator, amount=0, receipts=0, genesis_hash=genesis_hash,
                    status="submitting", created_at=time.time(),
                ).returning(settlements.c.id)
            ).scalar_one()
            conn.execute(
                update(receipts).where(
                    receipts.c.settle_status == "pending", receipts.c.operator == operator,
                    receipts.c.genesis_hash == genesis_hash, receipts.c.cost > 0,
                ).values(settle_status="claimed", settlement_id=sid)
            )
            amount, count = conn.execute(
                select(func.coalesce(func.sum(receipts.c.cost), 0), func.count())
                .where(receipts.c.settlement_id == sid)
            ).one()
            if count == 0:  # another instance claimed them first
                conn.execute(delete(settlements).where(settlements.c.id == sid))
                continue
            conn.execute(
                update(settlements).where(settlements.c.id == sid)
                .values(amount=int(amount), receipts=int(count))
            )
        out.append((sid, operator, int(amount), int(count)))
    return out


def record_submission(engine: Engine, sid: int, *, extrinsic_hash: str, nonce: int,
                      era_birth: int, era_period: int) -> None:
    """Before the transfer is sent: from here on, only the chain decides whether it paid."""
    with _w(engine).begin() as conn:
        done = conn.execute(update(settlements).where(
            settlements.c.id == sid, settlements.c.status == "submitting").values(
            status="submitted", extrinsic_hash=extrinsic_hash, nonce=nonce,
            era_birth=era_birth, era_period=era_period)).rowcount
    if done != 1:
        raise RuntimeError(f"settlement {sid} is no longer being submitted by this run")


def unresolved_settlements(engine: Engine, genesis_hash: str,
                           claimed_before: float) -> list[dict[str, Any]]:
    """Settlements whose outcome is open: every ``submitted`` one (sent, or perhaps sent, and
    not yet seen on chain), and ``submitting`` ones claimed before ``claimed_before`` (a run
    that ended before it recorded a transfer: nothing was sent)."""
    with engine.connect() as conn:
        rows = conn.execute(select(settlements).where(
            settlements.c.genesis_hash == genesis_hash,
            (settlements.c.status == "submitted")
            | ((settlements.c.status == "submitting")
               & (settlements.c.created_at < claimed_before)),
        ).order_by(settlements.c.id)).mappings().all()
    return [dict(r) for r in rows]


def finish_settlement(
    engine: Engine, sid: int, *, extrinsic_hash: str | None, block_hash: str | None,
    block_number: int | None, error: str | None,
) -> None:
    """The outcome: settled (the receipts name the extrinsic), or failed, and the receipts go
    back to pending (only when the chain shows the transfer cannot be included)."""
    still_open = (settlements.c.id == sid) & settlements.c.status.in_(("submitting", "submitted"))
    with _w(engine).begin() as conn:
        if error is None:
            done = conn.execute(update(settlements).where(still_open).values(
                status="settled", extrinsic_hash=extrinsic_hash, block_hash=block_hash,
                block_number=block_number)).rowcount
            if done:
                conn.execute(update(receipts).where(receipts.c.settlement_id == sid).values(
                    settle_status="settled", settled_extrinsic=extrinsic_hash,
                    settled_block=block_number))
        else:  # back to pending: the next run pays them
            done = conn.execute(update(settlements).where(still_open).values(
                status="failed", error=error[:2000])).rowcount
            if done:  # (another instance resolved it first otherwise)
                conn.execute(update(receipts).where(receipts.c.settlement_id == sid).values(
                    settle_status="pending", settlement_id=None))



"""Rate limits kept in the service's database, so they survive restarts and hold across
instances: a request reserves one event per rule (after checking every rule's window) in one
serialised transaction, before it does anything costly; a request that then fails releases its
reservation. Keys are stored as salted hashes, with the genesis they count for: after a network
reset every key starts afresh, and the old network's events stay, marked with their genesis.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import (
    Column,
    Float,
    Index,
    MetaData,
    String,
    Table,
    delete,
    func,
    insert,
    select,
    update,
)

from ops_tools.services.common.db import ROW_ID, Database
from ops_tools.services.common.hashing import salted_hash


def rate_events_table(metadata: MetaData, prefix: str) -> Table:
    """The events table of one service (``<prefix>_rate_events``); its migration creates it
    with ``rate_events_table(MetaData(), prefix).create(op.get_bind())``."""
    return Table(
        f"{prefix}_rate_events",
        metadata,
        Column("id", ROW_ID, primary_key=True,
               autoincrement=True),
        Column("genesis", String(66), nullable=False),
        Column("rule", String(32), nullable=False),
        Column("key_hash", String(64), nullable=False),
        Column("at", Float, nullable=False),
        Column("reservation", String(32), nullable=False),
        Column("state", String(10), nullable=False),
        Index(f"ix_{prefix}_rate_events_lookup", "rule", "key_hash", "genesis", "at"),
        Index(f"ix_{prefix}_rate_events_reservation", "reservation"),
    )


@dataclass(frozen=True)
class Rule:
    """At most ``limit`` events per ``window_s`` for ``key`` under the rule ``name``."""

    name: str
    key: str
    limit: int
    window_s: float


class LimitExceeded(Exception):
    def __init__(self, rule: str, retry_after_s: float, next_allowed_at: float,
                 limit: int, window_s: float) -> None:
        super().__init__(f"{rule}: at most {limit} per {window_s:g} s")
        self.rule = rule
        self.retry_after_s = retry_after_s
        self.next_allowed_at = next_allowed_at
        self.limit = limit
        self.window_s = window_s

    @property
    def retry_after(self) -> int:
        """Whole seconds for ``Retry-After`` (rounded up: never earlier than allowed)."""
        return max(1, math.ceil(self.retry_after_s))


class RateLimiter:
    def __init__(self, db: Database, table: Table, salt: bytes,
                 clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.table = table
        self.salt = salt
        self.clock = clock

    def key_hash(self, rule: Rule) -> str:
        return salted_hash(self.salt, f"{rule.name}:{rule.key}")

    def reserve(self, rules: Sequence[Rule], genesis: str) -> str:
        """Record one event per rule, or raise LimitExceeded for the rule that allows the next
        event latest; returns the reservation id."""
        t = self.table
        hashes = [self.key_hash(r) for r in rules]
        reservation = uuid.uuid4().hex
        with self.db.session(write=True) as s:
            self.db.lock(s, *(f"{t.name}:{r.name}:{h}" for r, h in zip(rules, hashes,
                                                                      strict=True)))
            now = self.clock()
            refusals: list[LimitExceeded] = []
            for rule, h in zip(rules, hashes, strict=True):
                if rule.limit <= 0:
                    refusals.append(LimitExceeded(rule.name, rule.window_s, now + rule.window_s,
                                                  rule.limit, rule.window_s))
                    continue
                since = now - rule.window_s
                where = (t.c.rule == rule.name, t.c.key_hash == h, t.c.genesis == genesis,
                         t.c.at > since)
                count = s.scalar(select(func.count()).select_from(t).where(*where)) or 0
                if count < rule.limit:
                    continue
                # The event whose expiry brings the count below the limit again.
                freeing = s.scalar(select(t.c.at).where(*where).order_by(t.c.at)
                                   .offset(count - rule.limit).limit(1))
                at = (freeing if freeing is not None else now) + rule.window_s
                refusals.append(LimitExceeded(rule.name, at - now, at, rule.limit,
                                              rule.window_s))
            if refusals:
                raise max(refusals, key=lambda r: r.retry_after_s)
            s.execute(insert(t), [
                {"genesis": genesis, "rule": r.name, "key_hash": h, "at": now,
                 "reservation": reservation, "state": "reserved"}
                for r, h in zip(rules, hashes, strict=True)
            ])
        return reservation

    def release(self, reservation: str) -> None:
        """Forget a reservation whose request failed: it counts against no limit."""
        with self.db.session(write=True) as s:
            s.execute(delete(self.table).where(self.table.c.reservation == reservation))

    def commit(self, reservation: str) -> None:
        with self.db.session(write=True) as s:
            s.execute(update(self.table).where(self.table.c.reservation == reservation)
                      .values(state="committed"))

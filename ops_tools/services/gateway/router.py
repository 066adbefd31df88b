"""Which worker serves a request: eligibility and least-busy choice, pure logic over a clock.

A worker is eligible while (a) its operator is registered on chain with at least MinStake, (b) the
operator's latest signed gateway heartbeat is for the current epoch or the one before, (c) its
health checks pass (it is down after ``checks_before_down`` failures in a row, and up again
after one pass), and (d) it is not cooling down after repeated failures. Among the eligible,
the least loaded takes the request (the gateway's own in-flight count, or the engine's running
and waiting requests the worker reports when that is higher); equally loaded ones are chosen
between at random, so a newly admitted operator's worker gets its share from the first
request. The gateway's I/O (chain reads, heartbeats, health checks) only updates this state;
every decision is here.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson


@dataclass
class Worker:
    worker_id: str  # "<operator ss58>@<endpoint>"
    operator: str
    endpoint: str
    models: tuple[str, ...]
    capacity: int
    # The Authorization header value for this worker alone (worker_token.py).
    auth: str = ""
    inflight: int = 0
    # The engine's own running + waiting requests, as the worker last claimed in its /health
    # (bounded by engine_load_claim); only ever makes the worker look busier than the gateway's
    # own count, never idler.
    reported_load: int = 0
    healthy: bool = False
    failed_checks: int = 0  # health checks failed in a row
    consecutive_failures: int = 0
    cooldown_until: float = 0.0


def engine_load_claim(raw: bytes, capacity: int) -> int:
    """The engine load a worker's /health body ``raw`` claims (``engine_load``: running and
    waiting), as a number the router may use: 0 for anything malformed, at most 4 x capacity.
    A worker gains nothing by under-reporting (the gateway's in-flight count is the floor), and
    an absurd over-report only keeps traffic from itself."""
    try:
        body: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return 0
    load = body.get("engine_load") if isinstance(body, dict) else None
    if not isinstance(load, dict):
        return 0
    total = 0
    for key in ("running", "waiting"):
        value = load.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return 0
        total += min(value, 4 * capacity)
    return min(total, 4 * capacity)


@dataclass
class ChainView:
    """What the gateway last read from the chain."""

    current_epoch: int | None = None
    min_stake: int = 0
    stakes: dict[str, int] = field(default_factory=dict)  # registered operators only


@dataclass(frozen=True)
class RouterPolicy:
    failures_before_cooldown: int = 3
    cooldown_s: float = 30.0
    # A healthy worker is taken out after this many failed health checks in a row, not one: a
    # check that times out on a busy host (its or the gateway's) says little, while a request
    # to a worker that is really gone fails fast and is retried on another.
    checks_before_down: int = 2


class Router:
    def __init__(self, policy: RouterPolicy | None = None,
                 rng: random.Random | None = None) -> None:
        self.policy = policy or RouterPolicy()
        self.rng = rng or random.Random()  # noqa: S311 (spreads load; no secret)
        self.workers: dict[str, Worker] = {}
        self.heartbeats: dict[str, int] = {}  # operator -> latest signed heartbeat epoch
        self.chain = ChainView()
        # Operators the gateway excludes for their conduct (usage misreports), with the reason;
        # set by the service from the database, consulted before anything else.
        self.excluded: dict[str, str] = {}

    # --- state updates -------------------------------------------------------------------
    def announce(self, worker: Worker) -> Worker:
        known = self.workers.get(worker.worker_id)
        if known is not None:
            known.models, known.capacity = worker.models, worker.capacity
            return known
        self.workers[worker.worker_id] = worker
        return worker

    def heartbeat(self, operator: str, epoch: int) -> None:
        if epoch > self.heartbeats.get(operator, -1):
            self.heartbeats[operator] = epoch

    def clear(self) -> None:
        """A new network (reset): registrations and heartbeats of the old one mean nothing."""
        self.workers.clear()
        self.heartbeats.clear()
        self.chain = ChainView()

    def checked(self, worker: Worker, passed: bool) -> None:
        """The outcome of one health check: a new worker is healthy from its first pass, and
        down after ``checks_before_down`` failures in a row."""
        if passed:
            worker.healthy, worker.failed_checks = True, 0
            return
        worker.failed_checks += 1
        if worker.failed_checks >= self.policy.checks_before_down:
            worker.healthy = False

    def succeeded(self, worker: Worker) -> None:
        worker.consecutive_failures = 0

    def failed(self, worker: Worker, now: float) -> None:
        worker.consecutive_failures += 1
        if worker.consecutive_failures >= self.policy.failures_before_cooldown:
            worker.cooldown_until = now + self.policy.cooldown_s
            worker.consecutive_failures = 0

    # --- decisions -----------------------------------------------------------------------
    def not_admitted(self, operator: str) -> str | None:
        """None when the chain view shows ``operator`` registered with at least MinStake: only
        then is its worker stored, contacted or routed to."""
        chain = self.chain
        stake = chain.stakes.get(operator)
        if stake is None:
            return "operator not registered on chain"
        if stake < chain.min_stake:
            return f"stake {stake} below MinStake {chain.min_stake}"
        return None

    def why_not(self, worker: Worker, now: float) -> str | None:
        """None when ``worker`` may take traffic, else the reason it may not."""
        chain = self.chain
        refused = self.not_admitted(worker.operator)
        if refused is not None:
            return refused
        excluded = self.excluded.get(worker.operator)
        if excluded is not None:
            return excluded
        epoch = self.heartbeats.get(worker.operator)
        if chain.current_epoch is None:
            return "current epoch unknown"
        if epoch is None or epoch < chain.current_epoch - 1:
            return f"heartbeat stale (epoch {epoch}, current {chain.current_epoch})"
        if not worker.healthy:
            return "health check failing"
        if now < worker.cooldown_until:
            return f"cooling down for {worker.cooldown_until - now:.0f} s after failures"
        return None

    def eligible(self, now: float) -> list[Worker]:
        return [w for w in self.workers.values() if self.why_not(w, now) is None]

    def live_models(self, now: float) -> dict[str, list[Worker]]:
        out: dict[str, list[Worker]] = {}
        for worker in self.eligible(now):
            for model in worker.models:
                out.setdefault(model, []).append(worker)
        return out

    def pick(self, model: str, now: float, exclude: Iterable[str] = ()) -> Worker | None:
        """The least busy eligible worker with a free slot for ``model``, a random one of the
        equally least busy (None: none)."""
        skip = set(exclude)
        best: list[Worker] = []
        best_load = 2.0
        for worker in self.workers.values():
            if model not in worker.models or worker.worker_id in skip:
                continue
            if worker.inflight >= worker.capacity or self.why_not(worker, now) is not None:
                continue
            load = max(worker.inflight, worker.reported_load) / worker.capacity
            if load < best_load:
                best, best_load = [worker], load
            elif load == best_load:
                best.append(worker)
        if len(best) > 1:
            return self.rng.choice(best)
        return best[0] if best else None

    def serves(self, model: str) -> bool:
        """Whether any known worker (live or not) announced ``model``: 503 rather than 404."""
        return any(model in w.models for w in self.workers.values())

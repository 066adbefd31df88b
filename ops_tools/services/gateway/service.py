"""The gateway at run time: its router fed from the database and the chain, its upstream client,
its background loops (registry refresh, chain poll, health checks, receipt reconciliation,
settlement)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable
from typing import Any

import aiohttp
from sqlalchemy import Engine, event

from ops_tools.chain.keys import keypair_from_secret
from ops_tools.chain.wire.worker_token import worker_token
from ops_tools.services.common.readiness import CheckResult, ReadyCheck
from ops_tools.services.gateway import chain_io, store
from ops_tools.services.gateway.bounded import CleanPoolConnector, OverLimit, read_answer
from ops_tools.services.gateway.config import GatewaySettings
from ops_tools.services.gateway.endpoints import PublicResolver
from ops_tools.services.gateway.pricing import Price
from ops_tools.services.gateway.router import Router, RouterPolicy, Worker, engine_load_claim

log = logging.getLogger("net.gateway")
# How long an idle connection to a worker stays in the pool. The worker keeps one open longer
# (ops_tools/worker/cli.py KEEP_ALIVE_S), so the gateway always closes first: a request never
# lands on a connection the worker is closing, and a pause between requests costs no new one.
UPSTREAM_KEEPALIVE_S = 60
FINAL_SETTLE_TIMEOUT_S = 8.0
CHAIN_RETRY_S = 0.5
SETTLE_RETRIES_S = (0.2, 0.5, 1.0, 2.0, 4.0)  # then the reconciler releases the reservation
OUTCOME_POLL_S = 0.5


def _no_wait_engine(engine: Engine) -> Engine:
    """One more connection to the SQLite database of ``engine``, with no busy wait."""
    from ops_tools.services.common.db import Database

    inline = Database(engine.url.render_as_string(hide_password=False), pool_size=1).engine

    @event.listens_for(inline, "connect")
    def _no_wait(dbapi_conn: Any, _record: Any) -> None:  # after the platform's own pragmas
        dbapi_conn.execute("PRAGMA busy_timeout=0")

    return inline


class ChainUnavailable(Exception):
    """The chain could not be read, so nobody can be admitted now."""


class GatewayState:
    def __init__(
        self,
        fields: GatewaySettings,
        engine: Engine,
        *,
        rpc_url: str,
        genesis_hash: str,
        worker_secret: str,
        settlement_secret: str | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.fields = fields
        self.engine = engine
        self.rpc_url = rpc_url
        self.genesis_hash = genesis_hash.lower()
        self._token_key = worker_secret.encode()
        self.settler = (
            chain_io.Settler(rpc_url,
                             keypair_from_secret(settlement_secret, key="settlement_seed_file"),
                             fields.chain_rpc_timeout_s, fields.settle_era_period)
            if settlement_secret else None
        )
        self.clock = clock
        self.router = Router(RouterPolicy(fields.failures_before_cooldown, fields.cooldown_s,
                                          fields.health_checks_before_down))
        self.prices = {name: p.price() for name, p in fields.prices.items()}
        self.default_price = fields.default_price.price()
        self.reader = chain_io.ChainReader(rpc_url, fields.chain_rpc_timeout_s)
        self.chain_error: str | None = "not read yet"
        self._chain_read_at = float("-inf")
        # One read at a time on the reader's connection; a read cut off by the timeout still
        # runs in its thread (it cannot be cancelled) and is waited for, never doubled.
        self._chain_lock = asyncio.Lock()
        self._reading: asyncio.Future[Any] | None = None
        # One long-lived pooled keep-alive client for every worker request, made in ``start``
        # (aiohttp binds it to the running loop). aiohttp rather than httpx: its per-request
        # cost is a fraction of httpx's, and the gateway pays it on every request.
        self.client: aiohttp.ClientSession | None = None
        # Database writes: SQLite has one write lock, and its busy handler waits by sleeping
        # (1, 2, 5, 10 ms, ...), so concurrent writers in one process queue on one thread
        # instead (each write is well under a millisecond); PostgreSQL's row locks wait without
        # sleeping, so there every request gets a thread.
        sqlite = engine.dialect.name == "sqlite"
        self._writer = concurrent.futures.ThreadPoolExecutor(
            max_workers=1 if sqlite else 64, thread_name_prefix="gw-write")
        # The hot path's two transactions on SQLite run on the event loop itself when the
        # database's write lock is free (about 0.05 ms of SQL: cheaper than a thread hop, and a
        # thread that must win the interpreter back from a busy loop can wait a switch interval,
        # 5 ms, at every statement). Its own connection never waits for the lock: a busy
        # database (another instance, the key CLI, a settlement run) sends the transaction to
        # the writer thread instead, which waits as usual.
        self._inline = _no_wait_engine(engine) if sqlite else None
        self._tasks: list[asyncio.Task[Any]] = []
        self._background: set[asyncio.Task[Any]] = set()

    def workers_check(self) -> ReadyCheck:
        """Always passes (no worker is not the gateway's fault: it answers 503 per model); the
        detail carries the live workers per model, which ``ops-tools status`` shows."""

        def probe() -> CheckResult:
            live = self.router.live_models(self.clock())
            known = len(self.router.workers)
            per_model = ", ".join(f"{m}={len(ws)}" for m, ws in sorted(live.items())) or "none"
            detail = f"live workers per model: {per_model}; {known} known"
            if self.router.excluded:
                detail += "".join(f"; operator {op} {why}"
                                  for op, why in sorted(self.router.excluded.items()))
            return CheckResult(True, detail)

        return ReadyCheck("workers", probe)

    def chain_view_check(self) -> ReadyCheck:
        """Red while the chain view has expired (reads failing or hung for longer than
        ``chain_view_max_age_s``): the gateway then routes nowhere."""

        def probe() -> CheckResult:
            age, limit = self.clock() - self._chain_read_at, self.fields.chain_view_max_age_s
            if age > limit:
                return CheckResult(False, f"no chain read for {age:.0f} s (limit {limit:.0f} s):"
                                   f" {self.chain_error}")
            return CheckResult(True, f"chain read {age:.1f} s ago")

        return ReadyCheck("chain_view", probe)

    def price(self, model: str) -> Price:
        return self.prices.get(model, self.default_price)

    def worker_token(self, worker_id: str) -> str:
        return worker_token(self._token_key, self.genesis_hash, worker_id)

    # --- lifecycle -------------------------------------------------------------------------
    def upstream_client(self) -> aiohttp.ClientSession:
        fields = self.fields
        # No default Authorization: each inference request carries its worker's own token,
        # health checks none.
        resolver = None if fields.allow_private_endpoints else PublicResolver()
        return aiohttp.ClientSession(
            connector=CleanPoolConnector(limit=2000, limit_per_host=0,
                                         keepalive_timeout=UPSTREAM_KEEPALIVE_S,
                                         resolver=resolver),
            timeout=aiohttp.ClientTimeout(total=fields.upstream_total_timeout_s,
                                          sock_connect=fields.upstream_connect_timeout_s,
                                          sock_read=fields.upstream_timeout_s),
            # Bodies pass through as bytes: nothing to decompress, no cookies to keep.
            auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar(),
            skip_auto_headers=("User-Agent",),
        )

    async def start(self) -> None:
        self.client = self.upstream_client()
        # Budget reservations are short blocking database calls; the default pool (CPUs + 4
        # threads) would queue them behind each other under concurrency.
        asyncio.get_running_loop().set_default_executor(
            concurrent.futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="gw-db"))
        closed = await self.write(store.forget_other_networks, self.engine, self.genesis_hash)
        if any(closed.values()):
            log.info("forgot the previous network's state: %s", closed)
        await self.reconcile()
        await self.refresh_registry()
        await self.poll_chain()
        loops = [
            (self.fields.registry_refresh_s, self.refresh_registry),
            (self.chain_poll_interval, self.poll_chain),
            (self.fields.health_interval_s, self.check_health),
            (self.fields.reconcile_interval_s, self.reconcile),
        ]
        if self.settler is not None:
            loops.append((self.fields.settle_interval_s, self.settle))
        self._tasks = [asyncio.create_task(self._every(s, f)) for s, f in loops]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        if self.settler is not None:
            # A reset stops the services before the chain: pay what is owed while it still
            # runs (what cannot be paid is closed by the next start on the new network).
            try:
                await asyncio.wait_for(self.settle(), FINAL_SETTLE_TIMEOUT_S)
            except Exception as exc:
                log.warning("final settlement did not finish: %s", exc)
        if self.client is not None:
            await self.client.close()
        self._writer.shutdown(wait=True)
        if self._inline is not None:
            self._inline.dispose()

    async def write(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run the store function ``fn`` on the writer thread(s)."""
        return await asyncio.get_running_loop().run_in_executor(self._writer, fn, *args)

    async def account(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run the hot path's store function ``fn(engine, *args)``: inline on SQLite while the
        write lock is free, else on the writer thread(s). Either way one whole transaction."""
        if self._inline is not None:
            try:
                return fn(self._inline, *args)
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                    raise  # (rolled back: retrying it on the writer thread is safe)
        return await self.write(fn, self.engine, *args)

    def settle_later(self, reservation: store.Reservation, receipt: dict[str, Any]) -> None:
        """Write the request's receipt and release its reservation, in the background."""
        self.spawn(self._settle_request(reservation, receipt))

    async def _settle_request(self, reservation: store.Reservation,
                              receipt: dict[str, Any]) -> None:
        # A failed write is retried; after the last one the receipt stays open and the
        # reconciler releases its reservation (nothing is lost either way).
        for pause in (*SETTLE_RETRIES_S, None):
            try:
                await self.account(store.settle_request, reservation, receipt)
                return
            except Exception as exc:
                if pause is None:
                    log.error("receipt %s not written (%s); the reconciler will release its"
                              " reservation", reservation.opening.request_id, exc)
                    return
                log.warning("writing receipt %s failed (%s); retrying",
                            reservation.opening.request_id, exc)
                await asyncio.sleep(pause)

    def spawn(self, coro: Any) -> None:
        """A fire-and-forget task that ``stop`` still waits for (receipts are never lost)."""
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def chain_poll_interval(self) -> float:
        """``chain_poll_s``, or less while the reads fail (the node restarting, a reset under
        way): the gateway is ready on a chain soon after its node serves it, not a poll later."""
        if self.chain_error is None:
            return self.fields.chain_poll_s
        return min(self.fields.chain_poll_s, CHAIN_RETRY_S)

    async def _every(self, seconds: float | Callable[[], float],
                     step: Callable[[], Any]) -> None:
        while True:
            await asyncio.sleep(seconds() if callable(seconds) else seconds)
            try:
                await step()
            except Exception:
                log.exception("%s failed", getattr(step, "__name__", step))

    # --- the loops -------------------------------------------------------------------------
    async def refresh_registry(self) -> None:
        rows, heartbeats = await asyncio.to_thread(
            store.load_registry, self.engine, self.genesis_hash,
            time.time() - self.fields.worker_ttl_s,
        )
        conduct = await asyncio.to_thread(
            store.misreporting_operators, self.engine, self.genesis_hash)
        seen = set()
        fresh: list[Worker] = []
        for row in rows:
            known = self.router.workers.get(row["worker_id"])
            worker = self.router.announce(Worker(
                worker_id=row["worker_id"], operator=row["operator"], endpoint=row["endpoint"],
                models=tuple(row["models"]), capacity=int(row["capacity"]),
                auth=f"Bearer {self.worker_token(row['worker_id'])}",
            ))
            if known is None:
                fresh.append(worker)
            seen.add(row["worker_id"])
        for worker_id in list(self.router.workers):
            if worker_id not in seen:
                del self.router.workers[worker_id]
        for operator, epoch in heartbeats.items():
            self.router.heartbeat(operator, epoch)
        self.router.excluded = self._exclusions(conduct)
        fresh = [w for w in fresh if self.router.not_admitted(w.operator) is None]
        if fresh:
            await asyncio.gather(*(self._check(w) for w in fresh))

    def _exclusions(self, conduct: list[dict[str, Any]]) -> dict[str, str]:
        fields, now = self.fields, time.time()
        return {
            row["operator"]: (f"excluded: {row['misreports']} usage misreports (latest:"
                              f" {row['last_reason']})")
            for row in conduct
            if row["misreports"] >= fields.misreports_before_exclusion
            and now - row["last_at"] < fields.misreport_exclusion_s
        }

    async def reconcile(self) -> None:
        """Close receipts (and release reservations) of requests no gateway will finish."""
        fields = self.fields
        # The longest a request lives: two attempts, each bounded by the total timeout.
        cutoff = time.time() - 2 * fields.upstream_total_timeout_s - fields.open_receipt_grace_s
        closed = await self.write(store.reconcile_open, self.engine, cutoff)
        if closed:
            log.warning("closed %d receipts of lost requests and released their reservations",
                        closed)

    async def admission(self, operator: str) -> str | None:
        """None when a fresh chain read shows ``operator`` registered with at least MinStake,
        else why not. Raises ``ChainUnavailable`` when the chain cannot be read."""
        await self.poll_chain(also=[operator])
        if self.chain_error is not None:
            raise ChainUnavailable(self.chain_error)
        return self.router.not_admitted(operator)

    async def poll_chain(self, also: Iterable[str] = ()) -> None:
        operators = [*(w.operator for w in self.router.workers.values()), *also]
        bound = self.fields.chain_rpc_timeout_s * 4  # the reader's calls time out themselves
        try:
            async with self._chain_lock:
                if self._reading is not None and not self._reading.done():
                    await asyncio.wait_for(asyncio.shield(self._reading), bound)
                self._reading = asyncio.ensure_future(
                    asyncio.to_thread(self.reader.read, operators))
                view = await asyncio.wait_for(asyncio.shield(self._reading), bound)
        except Exception as exc:
            self.chain_error = f"{type(exc).__name__}: {exc}"[:300]
            log.warning("reading the chain failed: %s", self.chain_error)
            # One failed read keeps the last view; a view older than the limit routes nowhere
            # (nobody is then known to be registered).
            if self.clock() - self._chain_read_at > self.fields.chain_view_max_age_s:
                self.router.chain.current_epoch = None
            return
        self.chain_error = None
        self._chain_read_at = self.clock()
        # A read answers for the operators it asked about, and for no other: one whose worker an
        # admission's read let in while this read waited for the lock keeps what that read said
        # (the next poll asks about it again), instead of reading as unregistered meanwhile.
        asked = set(operators)
        kept = {op: stake for op, stake in self.router.chain.stakes.items() if op not in asked}
        view.stakes = {**kept, **view.stakes}
        self.router.chain = view

    async def _check(self, worker: Worker) -> None:
        assert self.client is not None
        try:
            response = await self.client.get(worker.endpoint + "/health",
                                              timeout=aiohttp.ClientTimeout(total=3.0))
            raw = await read_answer(response, 65536)  # a health body is small; never more
            passed = response.status == 200
        except (aiohttp.ClientError, TimeoutError, OverLimit):
            passed, raw = False, b""
        self.router.checked(worker, passed)
        worker.reported_load = engine_load_claim(raw, worker.capacity) if passed else 0

    async def check_health(self) -> None:
        """Only admitted operators' workers are contacted: one that left the registry or fell
        below MinStake is not, until it is admitted again."""
        await asyncio.gather(*(self._check(w) for w in list(self.router.workers.values())
                               if self.router.not_admitted(w.operator) is None))

    async def settle(self) -> list[dict[str, Any]]:
        """Pay each operator what its receipts earned: one signed transfer per operator, paid
        exactly once. Open outcomes of earlier runs are resolved against the chain first."""
        if self.settler is None:
            return []
        await self._resolve_open()
        claims = await self.write(store.claim_for_settlement, self.engine, self.genesis_hash)
        done = []
        for sid, operator, amount, count in claims:
            try:
                signed = await asyncio.to_thread(self.settler.sign, operator, amount)
            except Exception as exc:  # nothing was sent: the receipts go back to pending
                await self._finish(sid, None, f"signing failed: {type(exc).__name__}: {exc}")
                log.warning("settlement of %s to %s failed: %s", amount, operator, exc)
                continue
            await self.write(functools.partial(
                store.record_submission, self.engine, sid, extrinsic_hash=signed.extrinsic_hash,
                nonce=signed.nonce, era_birth=signed.era_birth, era_period=signed.era_period))
            try:
                await asyncio.to_thread(self.settler.send, signed)
            except Exception as exc:
                log.warning("settlement %s: the submission's answer was %s; the chain decides",
                            sid, exc)
            outcome = await self._wait_outcome(signed)
            if outcome is None:
                log.warning("settlement %s (%s) not in a block yet; resolved by a later run",
                            sid, signed.extrinsic_hash)
                continue
            await self._finish(sid, outcome, extrinsic_hash=signed.extrinsic_hash)
            if outcome.success:
                done.append({"operator": operator, "amount": amount, "receipts": count,
                             "extrinsic_hash": signed.extrinsic_hash,
                             "block_number": outcome.block_number})
        return done

    async def _wait_outcome(self, signed: chain_io.Signed) -> chain_io.Outcome | None:
        assert self.settler is not None
        deadline = self.clock() + self.fields.settle_wait_s
        while True:
            try:
                outcome = await asyncio.to_thread(self.settler.outcome, signed.extrinsic_hash,
                                                  signed.era_birth, signed.era_period)
                if outcome.final:
                    return outcome
            except Exception as exc:
                log.warning("reading a settlement's outcome failed: %s", exc)
            if self.clock() >= deadline:
                return None
            await asyncio.sleep(OUTCOME_POLL_S)

    async def _resolve_open(self) -> None:
        """Settlements left open by earlier runs (this instance's, another's, a crashed one's):
        claimed but never sent go back to pending; sent (or perhaps sent) ones are decided by
        the chain, and stay open while the chain cannot tell yet."""
        assert self.settler is not None
        cutoff = time.time() - self.fields.settle_claim_grace_s
        rows = await asyncio.to_thread(store.unresolved_settlements, self.engine,
                                       self.genesis_hash, cutoff)
        for row in rows:
            if row["status"] == "submitting":
                await self._finish(row["id"], None, "claimed by a run that ended before it"
                                   " recorded a transfer: nothing was sent")
                continue
            try:
                outcome = await asyncio.to_thread(self.settler.outcome, row["extrinsic_hash"],
                                                  row["era_birth"], row["era_period"])
            except Exception as exc:
                log.warning("settlement %s: reading its outcome failed: %s", row["id"], exc)
                continue
            if outcome.final:
                await self._finish(row["id"], outcome, extrinsic_hash=row["extrinsic_hash"])

    async def _finish(self, sid: int, outcome: chain_io.Outcome | None,
                      error: str | None = None, extrinsic_hash: str | None = None) -> None:
        if outcome is not None and not outcome.success:
            error = outcome.error or (
                "the transfer expired without being included: nothing was paid")
        await self.write(functools.partial(
            store.finish_settlement, self.engine, sid, extrinsic_hash=extrinsic_hash,
            block_hash=None if outcome is None else outcome.block_hash,
            block_number=None if outcome is None else outcome.block_number,
            error=error,
        ))

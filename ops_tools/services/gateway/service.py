"""The gateway at run time: its router fed from the database and the chain, its upstream client,
its background loops (registry refresh, chain poll, health checks, settlement)."""

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

from ops_tools.services.common.readiness import CheckResult, ReadyCheck
from ops_tools.services.gateway import chain_io, store
from ops_tools.services.gateway.config import GatewaySettings
from ops_tools.services.gateway.endpoints import PublicResolver
from ops_tools.services.gateway.pricing import Price
from ops_tools.services.gateway.router import Router, RouterPolicy, Worker
from ops_tools.services.gateway.worker_token import worker_token

log = logging.getLogger("net.gateway")
FINAL_SETTLE_TIMEOUT_S = 8.0


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
        self.settlement = (
            chain_io.settlement_keypair(settlement_secret) if settlement_secret else None
        )
        self.clock = clock
        self.router = Router(RouterPolicy(fields.failures_before_cooldown, fields.cooldown_s))
        self.prices = {name: p.price() for name, p in fields.prices.items()}
        self.default_price = fields.default_price.price()
        self.reader = chain_io.ChainReader(rpc_url)
        self.chain_error: str | None = "not read yet"
        self._chain_read_at = float("-inf")
        self._chain_lock = asyncio.Lock()  # one read at a time on the reader's connection
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
            return CheckResult(True, f"live workers per model: {per_model}; {known} known")

        return ReadyCheck("workers", probe)

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
            connector=aiohttp.TCPConnector(limit=2000, limit_per_host=0, keepalive_timeout=60,
                                           resolver=resolver),
            timeout=aiohttp.ClientTimeout(total=None,
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
        await self.refresh_registry()
        await self.poll_chain()
        loops = [
            (self.fields.registry_refresh_s, self.refresh_registry),
            (self.fields.chain_poll_s, self.poll_chain),
            (self.fields.health_interval_s, self.check_health),
        ]
        if self.settlement is not None:
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
        if self.settlement is not None:
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

    def spawn(self, coro: Any) -> None:
        """A fire-and-forget task that ``stop`` still waits for (receipts are never lost)."""
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _every(self, seconds: float, step: Callable[[], Any]) -> None:
        while True:
            await asyncio.sleep(seconds)
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
        fresh = [w for w in fresh if self.router.not_admitted(w.operator) is None]
        if fresh:
            await asyncio.gather(*(self._check(w) for w in fresh))

    async def admission(self, operator: str) -> str | None:
        """None when a fresh chain read shows ``operator`` registered with at least MinStake,
        else why not. Raises ``ChainUnavailable`` when the chain cannot be read."""
        await self.poll_chain(also=[operator])
        if self.chain_error is not None:
            raise ChainUnavailable(self.chain_error)
        return self.router.not_admitted(operator)

    async def poll_chain(self, also: Iterable[str] = ()) -> None:
        operators = [*(w.operator for w in self.router.workers.values()), *also]
        try:
            async with self._chain_lock:
                view = await asyncio.to_thread(self.reader.read, operators)
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
        self.router.chain = view

    async def _check(self, worker: Worker) -> None:
        assert self.client is not None
        try:
            async with self.client.get(worker.endpoint + "/health",
                                       timeout=aiohttp.ClientTimeout(total=3.0)) as response:
                await response.read()
                worker.healthy = response.status == 200
        except (aiohttp.ClientError, TimeoutError):
            worker.healthy = False

    async def check_health(self) -> None:
        """Only admitted operators' workers are contacted: one that left the registry or fell
        below MinStake is not, until it is admitted again."""
        await asyncio.gather(*(self._check(w) for w in list(self.router.workers.values())
                               if self.router.not_admitted(w.operator) is None))

    async def settle(self) -> list[dict[str, Any]]:
        """Pay each operator what its receipts earned: one signed transfer per operator."""
        if self.settlement is None:
            return []
        claims = await self.write(store.claim_for_settlement, self.engine, self.genesis_hash)
        done = []
        for sid, operator, amount, count in claims:
            try:
                tx = await asyncio.to_thread(
                    chain_io.transfer, self.rpc_url, self.settlement, operator, amount
                )
            except Exception as exc:
                await self.write(functools.partial(
                    store.finish_settlement, self.engine, sid, extrinsic_hash=None,
                    block_hash=None, block_number=None, error=f"{type(exc).__name__}: {exc}",
                ))
                log.warning("settlement of %s to %s failed: %s", amount, operator, exc)
                continue
            await self.write(functools.partial(
                store.finish_settlement, self.engine, sid, extrinsic_hash=tx.extrinsic_hash,
                block_hash=tx.block_hash, block_number=tx.block_number, error=None,
            ))
            done.append({"operator": operator, "amount": amount, "receipts": count,
                         "extrinsic_hash": tx.extrinsic_hash, "block_number": tx.block_number})
        return done

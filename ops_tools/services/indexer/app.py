"""The API program: GraphQL at ``/graphql`` (GraphiQL on GET) on the platform's app. It only
reads, so several instances may serve from one PostgreSQL while one processor writes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
from cross_web import HTTPException
from fastapi import FastAPI, Response
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import Connection, text
from sqlalchemy.exc import ProgrammingError
from strawberry.fastapi import GraphQLRouter
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL

from ops_tools.chain.rpc import RpcClient, RpcError
from ops_tools.chain.urls import http_url
from ops_tools.errors import InputError
from ops_tools.services.common import jsonbody
from ops_tools.services.common.app import ServiceInfo, create_app
from ops_tools.services.common.db import Database
from ops_tools.services.common.migrations import migrate
from ops_tools.services.common.readiness import CheckResult, ReadyCheck, database_check
from ops_tools.services.indexer import queries
from ops_tools.services.indexer.config import IndexerSettings
from ops_tools.services.indexer.feed import CommitFeed
from ops_tools.services.indexer.processor import Processor, ProcessorOptions
from ops_tools.services.indexer.queries import QueryError, read_deadline
from ops_tools.services.indexer.schema import Context, Health, Subscribers, build_schema
from ops_tools.services.indexer.sockets import BoundedSendHandler, TransportAbort
from ops_tools.services.indexer.tables import Base

MIGRATIONS = Path(__file__).with_name("migrations")
VERSION_TABLE = "indexer_alembic_version"


#: How long an API whose role cannot migrate waits for the processor to have migrated.
MIGRATION_WAIT_S = 60.0


def open_database(settings: IndexerSettings, *, writer: bool = False) -> Database:
    """The index's database, migrated to the newest schema. The processor (``writer``) owns
    the tables: it migrates, then grants ``read_only_role`` SELECT on them. The API may
    connect as that role, which cannot migrate: it waits for the processor to have done it."""
    db = Database(settings.effective_database_url())
    if settings.read_only_role is not None and db.dialect != "postgresql":
        raise InputError(f"read_only_role: {settings.read_only_role!r} is a PostgreSQL role, "
                         f"but database_url is {db.dialect}; remove the key")
    deadline = time.monotonic() + MIGRATION_WAIT_S
    while True:
        try:
            migrate(db, MIGRATIONS, version_table=VERSION_TABLE)
            break
        except ProgrammingError as exc:
            if writer or not isinstance(exc.orig, psycopg.errors.InsufficientPrivilege):
                raise
            if time.monotonic() > deadline:
                raise InputError(
                    f"database_url: its role ({db.url.username}) may not migrate the index's "
                    f"schema, and the schema was not at the newest revision within "
                    f"{MIGRATION_WAIT_S:.0f} s; start net-indexer-processor on this database "
                    f"(it migrates, and grants its read_only_role SELECT)") from None
            time.sleep(1.0)
    if writer and settings.read_only_role is not None:
        grant_read(db, settings.read_only_role)
    return db


def grant_read(db: Database, role: str) -> None:
    """SELECT on every table of the index (and its schema version) to ``role``, nothing else:
    run by the tables' owner at each start, so tables a migration adds are granted too."""
    tables = [t.name for t in Base.metadata.sorted_tables] + [VERSION_TABLE]
    with db.session(write=True) as s:
        quote = s.get_bind().dialect.identifier_preparer.quote
        schema = s.execute(text("SELECT current_schema()")).scalar_one()
        try:
            s.execute(text(f"GRANT USAGE ON SCHEMA {quote(schema)} TO {quote(role)}"))
            s.execute(text(f"GRANT SELECT ON TABLE {', '.join(map(quote, tables))} "
                           f"TO {quote(role)}"))
        except ProgrammingError as exc:
            if isinstance(exc.orig, psycopg.errors.UndefinedObject):
                raise InputError(f"read_only_role: PostgreSQL has no role {role!r}; create it "
                                 f"(roles/indexer does) or remove the key") from None
            raise


class ChainHead:
    """The chain's genesis and best height, asked at most once a second (``/ready`` may be
    polled often, and by several instances), or at once when the caller saw them disagree with
    the index."""

    CACHE_S = 1.0
    FRESH_S = 0.1  # "at once", still bounded when /ready is polled hard during a reset

    def __init__(self, rpc_url: str) -> None:
        self.rpc = RpcClient(http_url(rpc_url), timeout=3.0)
        self._lock = threading.Lock()
        self._seen: tuple[float, str, int] | None = None

    def get(self, *, fresh: bool = False) -> tuple[str, int]:
        with self._lock:
            max_age = self.FRESH_S if fresh else self.CACHE_S
            if self._seen and time.monotonic() - self._seen[0] < max_age:
                return self._seen[1], self._seen[2]
        genesis, best = self.rpc.genesis_hash().lower(), self.rpc.best_number()
        with self._lock:
            self._seen = (time.monotonic(), genesis, best)
        return genesis, best


def index_checks(db: Database, head: ChainHead, max_lag: int) -> list[ReadyCheck]:
    """What the API's ``/ready`` means (docs/indexer.md): ``chain``, the node answers and the
    index's active network is the genesis it serves (detail: that genesis hash, as every
    service's chain check); ``index``, the index is within ``max_lag`` blocks of the node's best
    block on that genesis. After a reset both fail, naming the old and the new genesis, until
    the processor has switched to the new chain and caught up with it."""

    def reading() -> tuple[str, int, Any] | CheckResult:
        try:
            genesis, best = head.get()
        except RpcError as exc:
            return CheckResult(False, f"the chain does not answer: {exc}")
        try:
            with db.session() as s:
                net = queries.network(s.connection(), None)
        except QueryError as exc:
            return CheckResult(False, str(exc))
        if net.genesis_hash != genesis:
            # A reset in progress: ask the chain again rather than trust the cached answer, so
            # that /ready turns at the first poll after the processor switched, not a second on.
            try:
                genesis, best = head.get(fresh=True)
            except RpcError as exc:
                return CheckResult(False, f"the chain does not answer: {exc}")
        return genesis, best, net

    def chain() -> CheckResult:
        seen = reading()
        if isinstance(seen, CheckResult):
            return seen
        genesis, _best, net = seen
        if net.genesis_hash != genesis:
            return CheckResult(False, f"the chain serves genesis {genesis}, but the index is "
                                      f"still of genesis {net.genesis_hash} (reset count "
                                      f"{net.reset_count}); the processor archives it and "
                                      f"indexes the new chain from its genesis")
        return CheckResult(True, genesis)

    def index() -> CheckResult:
        seen = reading()
        if isinstance(seen, CheckResult):
            return seen
        genesis, best, net = seen
        if net.genesis_hash != genesis:
            return CheckResult(False, f"indexed #{net.height} of the old genesis "
                                      f"{net.genesis_hash}; nothing yet of {genesis}")
        lag = best - net.height
        if lag > max_lag:
            return CheckResult(False, f"indexed #{net.height}, chain at #{best}: {lag} blocks "
                                      f"behind (ready within {max_lag})")
        return CheckResult(True, f"indexed #{net.height} of {genesis}, chain #{best}, lag "
                                 f"{max(lag, 0)}, finalized #{net.finalized_height}, resets "
                                 f"{net.reset_count}")

    return [ReadyCheck("chain", chain), ReadyCheck("index", index)]


class _RefusedJson(json.JSONDecodeError):
    def __init__(self, error: jsonbody.JsonBodyError) -> None:
        super().__init__(str(error), "", 0)
        self.error = error


class IndexerRouter(GraphQLRouter):
    """A query refused before it ran (syntax, unknown field, depth, cost: errors without a
    path) is answered 400, as GraphQL over HTTP has it; errors while resolving keep 200. A
    subscriber's every message has a bounded time to be sent (sockets.py)."""

    graphql_transport_ws_handler_class = BoundedSendHandler

    # A GET's ``variables`` and ``extensions`` and every WebSocket message are JSON that the
    # platform's body check never sees: they get the same strict reading (jsonbody).
    def decode_json(self, data: str | bytes) -> object:
        try:
            return jsonbody.loads(data.encode("utf-8", "surrogatepass")
                                  if isinstance(data, str) else data)
        except jsonbody.JsonBodyError as exc:
            # strawberry closes a WebSocket on a JSONDecodeError (4400) and parse_json below
            # answers HTTP with 400.
            raise _RefusedJson(exc) from None

    def parse_json(self, data: str | bytes) -> Any:
        try:
            return self.decode_json(data)
        except _RefusedJson as refused:
            raise HTTPException(400, f"invalid_json: {refused.error}") from None

    def create_response(self, response_data: Any, sub_response: Response) -> Response:
        response = super().create_response(response_data, sub_response)
        errors = response_data.get("errors") if isinstance(response_data, dict) else None
        if errors and all(not e.get("path") for e in errors):
            response.status_code = 400
        return response


def graphql_router(db: Database, settings: IndexerSettings,
                   feed: CommitFeed | None = None) -> GraphQLRouter:
    def run(fn: Callable[[Connection], Any]) -> Any:
        with db.session() as s:
            conn = s.connection()
            with read_deadline(conn, settings.query_timeout_s):
                return fn(conn)

    async def read(fn: Callable[[Connection], Any]) -> Any:
        return await asyncio.to_thread(run, fn)

    limits = settings.limits()
    health = Health(stale_s=settings.step_stale_s(), max_lag=settings.ready_max_lag)

    subscribers = Subscribers(per_connection=settings.max_subscriptions_per_connection,
                              per_address=settings.max_subscriptions_per_address,
                              max_backlog=settings.subscription_max_backlog,
                              send_timeout_s=settings.subscription_send_timeout_s,
                              trusted_proxies=settings.trusted_proxies)

    async def get_context() -> dict[str, Any]:
        # Once per request, and once per WebSocket connection for its subscriptions.
        return {"indexer": Context(read=read, limits=limits, health=health, feed=feed,
                                   subscribers=subscribers)}

    return IndexerRouter(build_schema(limits, introspection=settings.introspection),
                         context_getter=get_context,
                         subscription_protocols=(GRAPHQL_TRANSPORT_WS_PROTOCOL,),
                         graphql_ide="graphiql" if settings.graphql_ide else None)


def processor_check(processor: Processor, settings: IndexerSettings) -> ReadyCheck:
    """The processor is ready when it is connected to the node, its last step completed
    recently and left it within ``ready_max_lag`` blocks of the node's best block; the detail
    carries its figures (``ops-tools status`` shows them)."""
    stale_s = settings.step_stale_s()

    def probe() -> CheckResult:
        step, lost = processor.last_step, processor.link_lost
        figures = "nothing indexed yet"
        if step is not None:
            figures = (f"indexed #{step.height} of {step.genesis_hash}, chain "
                       f"#{step.chain_height}, lag {max(step.chain_height - step.height, 0)}, "
                       f"finalized #{step.finalized_height}, resets {step.reset_count}")
        if lost is not None:
            return CheckResult(False, f"not connected to {settings.rpc_url} for "
                                      f"{time.monotonic() - lost.at:.1f} s ({lost.reason}); "
                                      f"{figures}")
        if step is None:
            return CheckResult(False, "no step completed yet (catching up)")
        age = time.monotonic() - step.at
        if age > stale_s:
            return CheckResult(False, f"last step {age:.0f} s ago ({figures})")
        if step.chain_height - step.height > settings.ready_max_lag:
            return CheckResult(False, f"catching up ({figures})")
        return CheckResult(True, figures)

    return ReadyCheck("processor", probe)


def build_processor_app(settings: IndexerSettings) -> FastAPI:
    """The processor program: the processor as the app's background task, with the
    platform's /health, /ready and /metrics."""
    db = open_database(settings, writer=True)
    processor = Processor(ProcessorOptions(
        rpc_url=settings.rpc_url, batch_size=settings.batch_size,
        fetch_ahead=settings.fetch_ahead, poll_interval_s=settings.poll_interval_s), db)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(processor.run())
        try:
            yield
        finally:
            processor.stop()
            try:
                # A step in progress (a long catch-up) is not waited for beyond this; every
                # batch is its own transaction, so stopping between any two is safe.
                await asyncio.wait_for(asyncio.shield(task), settings.shutdown_timeout_s)
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    return create_app(
        ServiceInfo("indexer-processor", description="Writes the indexer's database"),
        settings, ready_checks=[database_check(db), processor_check(processor, settings)],
        lifespan=lifespan, json_only=False)


def build_app(settings: IndexerSettings, db: Database | None = None) -> FastAPI:
    db = db or open_database(settings)
    head = ChainHead(settings.rpc_url)
    feed = CommitFeed(db)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        feed.start()
        try:
            yield
        finally:
            await feed.stop()

    app = create_app(
        ServiceInfo("indexer", description="GraphQL index of the chain's events"),
        settings,
        ready_checks=[database_check(db),
                      *index_checks(db, head, settings.ready_max_lag)],
        json_only=False, lifespan=lifespan,
    )
    app.include_router(graphql_router(db, settings, feed), prefix="/graphql")
    # Outermost, so that it sees the server's own send (and through it, the transport).
    app.add_middleware(TransportAbort)
    app.state.db = db
    app.state.registry.register(IndexLag(db, head))
    return app


class IndexLag(Collector):
    """The index's lag behind the node's best block, read at each scrape (roles/monitoring:
    IndexerLagging). No sample while the chain or the database does not answer, or while the
    index is of another genesis: /ready (ServiceNotReady) says so then."""

    def __init__(self, db: Database, head: ChainHead) -> None:
        self.db = db
        self.head = head

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("indexer_lag_blocks",
                                   "Blocks between the node's best and the last indexed")
        try:
            genesis, best = self.head.get()
            with self.db.session() as s:
                net = queries.network(s.connection(), None)
        # The chain's, the index's or any driver error: no sample, /ready says why.
        except Exception:
            net = None
        if net is not None and net.genesis_hash == genesis:
            family.add_metric([], max(best - net.height, 0))
        yield family

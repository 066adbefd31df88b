"""The faucet's HTTP API on the platform: ``POST /drip-public`` (JSON, or progress as NDJSON).

``net-faucet --config FILE`` builds the app here: settings validated, migrations run, the
signer's seed read from its 0600 file (or ``NET_FAUCET_SEED``) and registered for redaction.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio.to_thread
import orjson
from fastapi import FastAPI, Header, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse
from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ConfigDict, Field
from substrateinterface import Keypair

from ops_tools.errors import InputError
from ops_tools.services.common import logs
from ops_tools.services.common.app import ServiceInfo, create_app
from ops_tools.services.common.clientip import client_ip
from ops_tools.services.common.db import Database
from ops_tools.services.common.errors import ApiError
from ops_tools.services.common.migrations import migrate
from ops_tools.services.common.ratelimit import RateLimiter
from ops_tools.services.common.readiness import ChainWatch, database_check
from ops_tools.services.common.secrets import read_secret, secret_from
from ops_tools.services.faucet.config import FaucetSettings
from ops_tools.services.faucet.lease import SignerLease
from ops_tools.services.faucet.metrics import FaucetMetrics
from ops_tools.services.faucet.service import Faucet, Started
from ops_tools.services.faucet.signer import ChainUnavailable, Signer
from ops_tools.services.faucet.store import VERSION_TABLE, Ledger, rate_events

log = logging.getLogger("net.faucet")
SEED_ENV = "NET_FAUCET_SEED"
NDJSON = "application/x-ndjson"
# Each drip holds a worker thread while it waits for its block; the default 40 would queue
# the 41st concurrent request behind blocks it has nothing to do with.
WORKER_THREADS = 200


class DripRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    recipient: str = Field(
        description="The account to fund: an ss58 address with this network's prefix (42).",
        examples=["5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"],
        max_length=128,
    )


class Amount(BaseModel):
    plancks: str = Field(description="Integer, as a string (exceeds JSON's safe integers).")
    tokens: str
    symbol: str
    decimals: int


class DripResult(BaseModel):
    recipient: str
    amount: Amount
    extrinsic_hash: str
    block_hash: str = Field(description="The block in which the transfer was included.")
    block_number: int
    genesis_hash: str
    next_drip_at: str = Field(description="When this recipient may ask again (UTC, ISO 8601).")
    retry_after_s: int


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="allow")
    code: str
    message: str


class ErrorBody(BaseModel):
    error: ErrorDetail


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text}
    for status, text in {
        400: "A field is missing, unknown or invalid (the error names it)",
        403: "The recipient already holds more than the balance cap",
        409: "A request with this Idempotency-Key still runs after inclusion_timeout_s, or its"
             " outcome is unknown",
        413: "The body is over 1 KiB",
        415: "The body is not application/json",
        422: "The Idempotency-Key was used for another recipient",
        429: "A limit is reached (per recipient, per client IP, global); see Retry-After",
        502: "The node refused the transfer, it failed in its block, or the chain used its nonce"
             " for another transaction; nothing was sent",
        503: "The chain or the database is unreachable, on another genesis, the faucet is"
             " empty, or this instance does not hold its signer's lease",
        504: "Submitted, but not seen in a block in time",
    }.items()
}


def load_keypair(settings: FaucetSettings) -> Keypair:
    seed = secret_from(settings.seed_file, SEED_ENV, key="seed_file")
    logs.redact(seed)
    try:
        return Keypair.create_from_uri(seed, ss58_format=settings.ss58_prefix)
    except Exception:
        where = settings.seed_file or SEED_ENV
        raise InputError(
            f"seed_file: {where}: not a mnemonic, 0x seed or secret URI (//Name); fix its content"
        ) from None


def load_salt(settings: FaucetSettings, ledger: Ledger) -> bytes:
    """The configured salt (every instance is given the same file), else the database's."""
    if settings.salt_file is not None:
        salt = read_secret(settings.salt_file, key="salt_file").encode()
        if len(salt) < 16:
            raise InputError(f"salt_file: {settings.salt_file}: {len(salt)} bytes is too short;"
                             " put at least 16 random characters in it")
        return salt
    legacy = settings.legacy_salt_path()
    return ledger.shared_salt(legacy.read_bytes() if legacy.is_file() else None)


def _line(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj) + b"\n"


def build_app(settings: FaucetSettings) -> FastAPI:
    keypair = load_keypair(settings)
    db = Database(settings.effective_database_url())
    migrate(db, Path(__file__).parent / "migrations", version_table=VERSION_TABLE)
    ledger = Ledger(db)
    salt = load_salt(settings, ledger)
    lease = SignerLease(db, keypair.public_key.hex(), keypair.ss58_address,
                        settings.signer_lease_s)
    lease.acquire()  # before anything signs: a second signer on this seed stops here
    registry = CollectorRegistry()
    metrics = FaucetMetrics(registry)
    watch = ChainWatch(settings.rpc_url, settings.genesis_hash,
                       timeout_s=min(settings.rpc_timeout_s, 3.0))
    with contextlib.suppress(Exception):  # a chain that is down now makes /ready say so
        watch.current_genesis(fresh=True)
    wake = threading.Event()
    signer = Signer(settings.rpc_url, keypair, ss58_format=settings.ss58_prefix,
                    poll_interval_s=settings.poll_interval_s, timeout_s=settings.rpc_timeout_s,
                    ticket_ttl_s=settings.ticket_ttl_s, on_resolved=lambda _t: wake.set())
    faucet = Faucet(settings, ledger=ledger, limiter=RateLimiter(db, rate_events, salt),
                    signer=signer, watch=watch, metrics=metrics, salt=salt, lease=lease,
                    wake=wake)
    stop = threading.Event()

    def refresh_balance() -> None:
        while not stop.is_set():
            with contextlib.suppress(ChainUnavailable):
                faucet.refresh_balance()
            stop.wait(settings.balance_refresh_s)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        anyio.to_thread.current_default_thread_limiter().total_tokens = WORKER_THREADS
        lease.start()
        with contextlib.suppress(Exception):  # the chain may be away; the settler retries
            faucet.adopt()
        signer.start()
        threads = [threading.Thread(target=refresh_balance, name="faucet-balance", daemon=True),
                   threading.Thread(target=faucet.run_settler, args=(stop,),
                                    name="faucet-settler", daemon=True)]
        for thread in threads:
            thread.start()
        try:
            yield
        finally:
            if left := await anyio.to_thread.run_sync(faucet.drain,
                                                      settings.shutdown_timeout_s):
                log.warning("%d drip(s) still in flight at shutdown; the next start follows"
                            " them again", left)
            stop.set()
            faucet.wake.set()
            threads[1].join(timeout=5)
            signer.close()
            lease.release()
            db.dispose()

    app = create_app(
        ServiceInfo("faucet", description="Small drips of the test token to new accounts."),
        settings,
        ready_checks=[database_check(db), watch.ready_check(), faucet.balance_check(),
                      lease.ready_check()],
        lifespan=lifespan,
        registry=registry,
    )
    app.state.faucet = faucet

    @app.get("/info", tags=["faucet"], summary="The faucet's address, drip and limits")
    async def info() -> dict[str, Any]:
        lim = settings.limits
        return {
            "address": signer.address,
            "genesis_hash": watch.expected,
            "drip": {"plancks": str(settings.drip_plancks), "symbol": settings.token_symbol,
                     "decimals": settings.token_decimals},
            "balance_plancks": None if (b := faucet.known_balance()) is None else str(b),
            "limits": {
                "per_recipient": {"count": 1, "window_s": lim.recipient_window_s},
                "per_ip": {"count": lim.per_ip.count, "window_s": lim.per_ip.window_s},
                "global_per_hour": lim.global_per_hour,
                "balance_cap_plancks": str(lim.balance_cap_plancks),
            },
        }

    @app.post(
        "/drip-public",
        tags=["faucet"],
        summary="Send a small amount of the token to an account",
        response_model=DripResult,
        responses={**ERRORS, 200: {"content": {NDJSON: {}}, "description": (
            "The drip, included in a block. With Accept: application/x-ndjson, one line per"
            " step (submitted, included, finalized) and then this object.")}},
    )
    async def drip(
        body: DripRequest,
        request: Request,
        idempotency_key: str | None = Header(default=None, alias="Idempotency-Key"),
    ) -> Any:
        outcome = "error"
        peer = request.client.host if request.client else ""
        ip = client_ip(peer, request.headers.getlist("x-forwarded-for"),
                       settings.trusted_proxies)
        try:
            started = await run_in_threadpool(faucet.start, body.recipient, ip, idempotency_key)
            if NDJSON in request.headers.get("accept", ""):
                outcome = "streamed"
                return StreamingResponse(_progress(started), media_type=NDJSON)
            result = await run_in_threadpool(faucet.finish, started)
            outcome = "replayed" if started.replay is not None else "dripped"
            return result
        except ApiError as exc:
            outcome = exc.code
            raise
        finally:
            metrics.requests.labels(outcome).inc()

    async def _progress(started: Started) -> AsyncIterator[bytes]:
        if started.replay is not None:
            yield _line(started.replay)
            return
        assert started.ticket is not None
        yield _line({"status": "submitted", "recipient": started.recipient,
                     "extrinsic_hash": started.ticket.extrinsic_hash,
                     "genesis_hash": started.genesis})
        try:
            result = await run_in_threadpool(faucet.finish, started)
        except ApiError as exc:
            # The status line is gone already; the stream ends with the error object.
            yield _line(exc.body())
            return
        yield _line({"status": "included", "block_hash": result["block_hash"],
                     "block_number": result["block_number"]})
        final = await run_in_threadpool(faucet.wait_finalized, started)
        yield _line({"status": "finalized" if final else "finality_timeout",
                     "block_hash": result["block_hash"], "block_number": result["block_number"]})
        yield _line(result)

    return app


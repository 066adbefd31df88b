"""The faucet's HTTP API on the platform: ``POST /drip-public`` (JSON, or progress as NDJSON) and
``GET /info``, in ``routes.router``.

``net-faucet --config FILE`` builds the app here: settings validated, migrations run, the
signer's seed read from its 0600 file (or ``NET_FAUCET_SEED``) and registered for redaction.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import anyio.to_thread
from fastapi import FastAPI
from prometheus_client import CollectorRegistry
from substrateinterface import Keypair

from ops_tools.chain.keys import keypair_from_secret
from ops_tools.services.common import logs
from ops_tools.services.common import salt as shared_salt
from ops_tools.services.common.app import ServiceInfo, create_app
from ops_tools.services.common.db import Database
from ops_tools.services.common.migrations import migrate
from ops_tools.services.common.ratelimit import RateLimiter
from ops_tools.services.common.readiness import ChainWatch, database_check
from ops_tools.services.common.secrets import secret_from
from ops_tools.services.faucet import routes
from ops_tools.services.faucet.config import FaucetSettings
from ops_tools.services.faucet.lease import SignerLease
from ops_tools.services.faucet.metrics import FaucetMetrics
from ops_tools.services.faucet.service import Faucet
from ops_tools.services.faucet.signer import ChainUnavailable, Signer
from ops_tools.services.faucet.store import VERSION_TABLE, Ledger, rate_events, shared

log = logging.getLogger("net.faucet")
SEED_ENV = "NET_FAUCET_SEED"
# Each drip holds a worker thread while it waits for its block; the default 40 would queue
# the 41st concurrent request behind blocks it has nothing to do with.
WORKER_THREADS = 200


def load_keypair(settings: FaucetSettings) -> Keypair:
    seed = secret_from(settings.seed_file, SEED_ENV, key="seed_file")
    logs.redact(seed)
    return keypair_from_secret(seed, key=f"seed_file: {settings.seed_file or SEED_ENV}",
                               ss58_format=settings.ss58_prefix)


def load_salt(settings: FaucetSettings, ledger: Ledger) -> bytes:
    """The configured salt (every instance is given the same file), else the database's."""
    return shared_salt.load_salt(ledger.db, shared, settings.salt_file,
                                 settings.legacy_salt_path())


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
    metrics = FaucetMetrics(registry, settings.drip_plancks)
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

    app.include_router(routes.router)
    return app


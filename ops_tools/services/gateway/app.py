"""The gateway's app: settings, secrets, database, chain watch and state on the platform."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

from fastapi import FastAPI
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ops_tools.secrets import read_secret
from ops_tools.services.common import logs
from ops_tools.services.common.app import ServiceInfo, create_app
from ops_tools.services.common.readiness import ChainWatch, database_check
from ops_tools.services.common.settings import SettingsError
from ops_tools.services.gateway import store
from ops_tools.services.gateway.config import GatewaySettings
from ops_tools.services.gateway.database import open_database
from ops_tools.services.gateway.openai_errors import platform_error_body
from ops_tools.services.gateway.routes import install
from ops_tools.services.gateway.service import GatewayState


def build_app(settings: GatewaySettings) -> FastAPI:
    worker_secret = read_secret(settings.worker_secret_file, key="worker_secret_file")
    logs.redact(worker_secret)
    seed = (read_secret(settings.settlement_seed_file, key="settlement_seed_file")
            if settings.settlement_seed_file else None)
    if seed:
        logs.redact(seed)
    db = open_database(settings.effective_database_url())
    if settings.dev_api_key_file is not None:
        if not settings.dev_api_key_account:
            raise SettingsError("dev_api_key_account: null: the account that pays for the"
                                " development key is needed with dev_api_key_file")
        dev_key = read_secret(settings.dev_api_key_file, key="dev_api_key_file")
        store.ensure_key(db.engine, dev_key, settings.dev_api_key_account)
    watch = ChainWatch(settings.rpc_url, settings.genesis_hash)
    genesis = settings.genesis_hash or watch.current_genesis(fresh=True)
    state = GatewayState(settings, db.engine, rpc_url=settings.rpc_url, genesis_hash=genesis,
                         worker_secret=worker_secret, settlement_secret=seed)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        await state.start()
        try:
            yield
        finally:
            await state.stop()
            db.dispose()

    app = create_app(
        ServiceInfo("gateway", description="OpenAI-compatible inference gateway (test mode)"),
        settings, ready_checks=[database_check(db), watch.ready_check(), state.chain_view_check(),
                      state.workers_check()],
        lifespan=lifespan,
        error_shape="own", error_body=platform_error_body,
    )
    install(app, state, settings.max_body_bytes)
    app.state.registry.register(GatewayGauges(state))
    return app


class GatewayGauges(Collector):
    """Read at each scrape (roles/monitoring): live workers per model, every priced model (the
    ones the network offers) with a sample, 0 when no worker serves it (GatewayNoLiveWorker);
    the paid receipts not settled yet (SettlementBacklogGrowing)."""

    def __init__(self, state: GatewayState) -> None:
        self.state = state

    def collect(self) -> Iterator[GaugeMetricFamily]:
        live = self.state.router.live_models(self.state.clock())
        family = GaugeMetricFamily("gateway_live_workers", "Live workers per model",
                                   labels=["model"])
        for model in sorted(set(self.state.prices) | set(live)):
            family.add_metric([model], len(live.get(model, [])))
        yield family
        backlog = GaugeMetricFamily("gateway_settlement_backlog_receipts",
                                    "Paid receipts of this network not settled yet")
        backlog.add_metric([], store.settlement_backlog(self.state.engine,
                                                        self.state.genesis_hash))
        yield backlog


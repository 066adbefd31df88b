"""The gateway's app: settings, secrets, database, chain watch and state on the platform."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI

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
    return app


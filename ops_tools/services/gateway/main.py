"""``net-gateway --config FILE``."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import uvicorn

from ops_tools.errors import OpsError
from ops_tools.services.gateway import chain_io, db
from ops_tools.services.gateway.app import build_standalone_app
from ops_tools.services.gateway.service import GatewayState
from ops_tools.services.gateway.settings import GatewaySettings, load
from ops_tools.services.worker.cli import read_secret


def build(settings: GatewaySettings):  # noqa: ANN201 - Starlette app
    worker_secret = read_secret(settings.worker_secret_file, "worker_secret_file") \
        if settings.worker_secret_file else None
    if worker_secret is None:
        raise OpsError("worker_secret_file: not set; point it at the workers' shared secret")
    seed = read_secret(settings.settlement_seed_file, "settlement_seed_file") \
        if settings.settlement_seed_file else None
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    engine = db.make_engine(settings.db_url())
    db.create_tables(engine)
    genesis = settings.genesis_hash or chain_io.ChainReader(settings.rpc_url).genesis_hash()
    state = GatewayState(settings, engine, rpc_url=settings.rpc_url, genesis_hash=genesis,
                         worker_secret=worker_secret, settlement_secret=seed)
    return build_standalone_app(state, settings.max_body_bytes)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="net-gateway", description="The inference gateway.")
    parser.add_argument("--config", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        settings = load(args.config)
        app = build(settings)
    except OpsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    logging.basicConfig(level=settings.log_level.upper(),
                        format="%(asctime)s %(name)s %(message)s")
    config = uvicorn.Config(app, host=settings.listen_host, port=settings.listen_port,
                            log_level=settings.log_level, access_log=False, loop="uvloop",
                            http="httptools", timeout_graceful_shutdown=10)
    uvicorn.Server(config).run()

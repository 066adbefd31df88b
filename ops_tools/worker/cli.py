"""Console scripts: ``net-worker`` and ``net-test-engine`` (the TEST ENGINE as its own server)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Any

import uvicorn
from substrateinterface import Keypair

from ops_tools.chain.keys import keypair_from_file
from ops_tools.errors import OpsError
from ops_tools.wallet.keystore import Keystore, default_keystore_dir
from ops_tools.wallet.passphrase import read_passphrase_file
from ops_tools.worker import app as server
from ops_tools.worker import config as settings
from ops_tools.worker import sdnotify
from ops_tools.worker.drain import Drain, DrainingServer
from ops_tools.worker.engines import ENGINE_KINDS, EngineFront, make_engine
from ops_tools.worker.liveness import Liveness


def load_keypair(s: settings.WorkerSettings) -> Keypair:
    if s.dev_suri_file is not None:
        return keypair_from_file(s.dev_suri_file, key="dev_suri_file")
    assert s.passphrase_file is not None
    keystore = Keystore(s.keystore_dir or default_keystore_dir())
    return keystore.unlock_hotkey(s.account, read_passphrase_file(s.passphrase_file))


# How long an idle keep-alive connection from the gateway stays open: longer than the gateway's
# pool keeps one (60 s, gateway/service.py UPSTREAM_KEEPALIVE_S). uvicorn's default, 5 s, closed
# the gateway's pooled connection at every pause of 5 s (the gateway's health checks come every
# 5 s), so its next request paid a new connection, or raced the close and failed (a worker
# failure to the gateway, retried elsewhere).
KEEP_ALIVE_S = 75


def _config(app: Any, host: str, port: int, log_level: str) -> uvicorn.Config:
    return uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False,
                          timeout_graceful_shutdown=10, timeout_keep_alive=KEEP_ALIVE_S)


def _serve(app: Any, host: str, port: int, log_level: str) -> None:
    uvicorn.Server(_config(app, host, port, log_level)).run()


def worker_main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="net-worker",
        description="An operator's inference worker: announces itself to the gateway, heartbeats"
        " (gateway and chain) and forwards the gateway's requests to the engine.",
    )
    parser.add_argument("--config", type=Path, help="YAML settings file")
    parser.add_argument("--engine-url", help="OpenAI-compatible engine base URL, or 'test' for"
                        " the built-in TEST ENGINE")
    parser.add_argument("--engine-kind", choices=ENGINE_KINDS,
                        help="the engine's dialect (default: test for 'test', else openai)")
    parser.add_argument("--gateway-url")
    parser.add_argument("--rpc-url")
    parser.add_argument("--listen-port", type=int)
    parser.add_argument("--account")
    parser.add_argument("--passphrase-file", type=Path)
    parser.add_argument("--log-level", choices=["debug", "info", "warning", "error"])
    args = parser.parse_args(argv)
    try:
        s = settings.load(args.config, {
            "engine_url": args.engine_url, "engine_kind": args.engine_kind,
            "gateway_url": args.gateway_url,
            "rpc_url": args.rpc_url or os.environ.get("NET_RPC_URL"),
            "listen_port": args.listen_port, "account": args.account,
            "passphrase_file": args.passphrase_file,
        })
        keypair = load_keypair(s)
    except OpsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    log_level = args.log_level or s.log_level
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(name)s %(message)s")
    assert s.engine_kind is not None
    engine = EngineFront(
        [make_engine(s.engine_kind, s.engine_url, s.models, s.test_engine_token_delay_ms,
                      s.engine_model_path, s.engine_keepalive_s)]
        + [make_engine(extra.kind, extra.url, [], keepalive_s=s.engine_keepalive_s)
           for extra in s.extra_engines],
        [[] if s.engine_kind == settings.TEST_ENGINE else list(s.models)]
        + [list(extra.models) for extra in s.extra_engines])
    holder: dict[str, Liveness] = {}

    async def on_start() -> None:
        models = await engine.models()
        liveness = Liveness(s, keypair, models)
        holder["liveness"] = liveness
        liveness.start()
        sdnotify.notify("READY=1")

    async def on_stop() -> None:
        # Once: a drain has stopped the liveness duties already.
        live = holder.pop("liveness", None)
        if live is not None:
            await asyncio.to_thread(live.stop)

    def status() -> dict[str, Any]:
        live = holder.get("liveness")
        if live is None:
            return {}
        st = live.state
        return {"operator": keypair.ss58_address, "epoch": st.epoch,
                "registered": st.registered, "chain_heartbeat_epoch": st.chain_heartbeat_epoch,
                "gateway_heartbeat_epoch": st.gateway_heartbeat_epoch, "errors": st.errors}

    def ready() -> str | None:
        live = holder.get("liveness")
        if live is None:
            return "starting"
        if live.state.errors:
            return live.state.errors[0]
        return None if live.state.ticks_ok else "announcing and heartbeating"

    def token() -> str | None:
        live = holder.get("liveness")
        return live.state.gateway_token if live is not None else None

    drain = Drain()
    app = server.build_app(engine, token, on_start=on_start, on_stop=on_stop, status=status,
                           ready=ready, drain=drain)

    async def on_drain() -> None:
        # No more announcements nor heartbeats: the gateway stops routing here (and its health
        # check sees 503); the requests in flight already passed the token check.
        await on_stop()
        sdnotify.notify("STOPPING=1")

    config = _config(drain.wrap(app), s.listen_host, s.listen_port, log_level)
    DrainingServer(config, drain, s.drain_timeout_s, on_drain).run()


def test_engine_main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="net-test-engine",
        description="The TEST ENGINE as an OpenAI-compatible server (no GPU, no weights:"
        " deterministic text, honest token counts). For tests and benchmarks only.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8200)
    parser.add_argument("--model", action="append", default=[])
    parser.add_argument("--token-delay-ms", type=int, default=0)
    args = parser.parse_args(argv)
    if not args.host.startswith("127."):
        print(f"error: --host: {args.host!r}: the test engine listens on loopback only",
              file=sys.stderr)
        raise SystemExit(2)
    app = server.build_app(EngineFront([make_engine("test", "test", args.model,
                                                    args.token_delay_ms)]), None)
    _serve(app, args.host, args.port, "warning")

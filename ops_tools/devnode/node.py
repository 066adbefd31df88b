"""Wiring of one node: chain, pool, keystore, finality, authoring, RPC, metrics, network."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import signal
from typing import Any

from aiohttp import web

from ops_tools.devnode import metrics
from ops_tools.devnode.authoring import Author
from ops_tools.devnode.chain import Chain, Head, short
from ops_tools.devnode.chain_spec import ChainSpec
from ops_tools.devnode.config import ChainPaths, NodeConfig
from ops_tools.devnode.finality import Finality, default_delay_ms
from ops_tools.devnode.keystore import Keystore
from ops_tools.devnode.network.service import Network
from ops_tools.devnode.node_key import peer_id, public_of
from ops_tools.devnode.pool import Pool
from ops_tools.devnode.rpc.methods import UNSAFE, Api
from ops_tools.devnode.rpc.server import RpcServer
from ops_tools.devnode.storage import Database
from ops_tools.errors import OpsError

log = logging.getLogger("devnode")
INFORMANT_PERIOD = 5.0


class Node:
    def __init__(
        self,
        config: NodeConfig,
        spec: ChainSpec,
        paths: ChainPaths,
        node_secret: bytes,
        version: str,
    ) -> None:
        self.config, self.spec, self.paths = config, spec, paths
        self.name, self.version, self.validator = config.name, version, config.validator
        self.node_secret = node_secret
        self.peer_id = peer_id(public_of(node_secret))
        self.keystore = Keystore(paths.keystore)
        self.db = Database(paths.db)
        self.chain = Chain(spec, self.db)
        self.pool = Pool(self.chain)
        self.loop: asyncio.AbstractEventLoop = asyncio.get_event_loop()
        delay_ms = config.finality_delay_ms or default_delay_ms(self.chain.config.slot_duration)
        self.finality = Finality(
            self.chain,
            self.keystore if config.validator else None,
            delay_ms / 1000,
            lambda seconds, fn: self.loop.call_later(seconds, fn),
        )
        self.author = Author(self.chain, self.pool, self.keystore, self.is_syncing)
        self.new_heads: list[Any] = []
        self.all_heads: list[Any] = []
        self.finalized_heads: list[Any] = []
        self.starting_block = self.chain.best.number
        self.allow_unsafe = config.allow_unsafe
        self.chain.import_listeners.append(self._on_import)
        self.chain.finality_listeners.append(self._on_finalized)
        self._runners: list[web.AppRunner] = []
        self.network = Network(self)

    # ---- status used by RPC and metrics ----------------------------------------------------------
    def peer_count(self) -> int:
        return self.network.peer_count()

    def peers_info(self) -> list[dict[str, Any]]:
        return self.network.peers_info()

    def is_syncing(self) -> bool:
        return self.network.is_syncing()

    def highest_seen(self) -> int:
        return self.network.highest_seen()

    def listen_addresses(self) -> list[str]:
        return [f"/ip4/{self.config.p2p_host}/tcp/{self.config.p2p_port}/p2p/{self.peer_id}"]

    def keys_changed(self) -> None:
        """Keys inserted over RPC take effect at the next slot and vote (both read the keystore)."""

    # ---- events ----------------------------------------------------------------------------------
    def _on_import(self, head: Head, is_best: bool, origin: str) -> None:
        if is_best:
            emoji = "🏆" if origin == "own" else "✨"
            log.info("%s Imported #%d (%s)", emoji, head.number, short(head.hash))
            for push in list(self.new_heads):
                push(head)
        for push in list(self.all_heads):
            push(head)

    def _on_finalized(self, head: Head) -> None:
        for push in list(self.finalized_heads):
            push(head)

    # ---- run -------------------------------------------------------------------------------------
    async def _serve(
        self, app: web.Application, host: str, port: int, what: str, flag: str
    ) -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port, reuse_address=True)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            if exc.errno == errno.EADDRINUSE:
                raise OpsError(
                    f"{what} port {host}:{port} is already in use; choose another with {flag}"
                ) from None
            raise OpsError(f"{what}: cannot listen on {host}:{port}: {exc.strerror}") from None
        self._runners.append(runner)

    async def run(self) -> None:
        self.loop = asyncio.get_running_loop()
        cfg = self.config
        api = Api(self)
        server = RpcServer(
            api.methods(), UNSAFE, cfg.allow_unsafe, cfg.rpc_max_request, cfg.rpc_cors
        )
        await self._serve(server.app(), cfg.rpc_host, cfg.rpc_port, "RPC", "--rpc-port")
        log.info(
            "Running JSON-RPC server: addr=%s:%d, allowed origins=%s",
            cfg.rpc_host,
            cfg.rpc_port,
            "all" if cfg.rpc_cors is None else cfg.rpc_cors,
        )
        if cfg.prometheus_port is not None:
            await self._serve(
                metrics.app(self),
                cfg.prometheus_host,
                cfg.prometheus_port,
                "Prometheus",
                "--prometheus-port",
            )
            log.info(
                "〽️ Prometheus exporter started at %s:%d", cfg.prometheus_host, cfg.prometheus_port
            )
        await self.network.start()
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                self.loop.add_signal_handler(sig, stop.set)
        tasks = [asyncio.create_task(self._informant())]
        if cfg.validator:
            tasks.append(asyncio.create_task(self.author.run()))
        # A restarted authority votes for the head it already has, so finality can resume.
        self.finality.vote_local()
        await stop.wait()
        log.info("Shutting down")
        for t in tasks:
            t.cancel()
        await self.network.stop()
        for runner in self._runners:
            await runner.cleanup()
        self.db.close()

    async def _informant(self) -> None:
        while True:
            await asyncio.sleep(INFORMANT_PERIOD)
            best, fin = self.chain.best, self.chain.finalized
            status = "⚙️  Syncing" if self.is_syncing() else "💤 Idle"
            log.info(
                "%s (%d peers), best: #%d (%s), finalized #%d (%s), ⬇ 0 ⬆ 0",
                status,
                self.peer_count(),
                best.number,
                short(best.hash),
                fin.number,
                short(fin.hash),
            )

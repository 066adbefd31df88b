"""The two programs: ``net-indexer --config F`` (the GraphQL API) and
``net-indexer-processor --config F`` (follows the chain and writes the index)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

from ops_tools import __version__
from ops_tools.errors import OpsError
from ops_tools.services.common import logs
from ops_tools.services.common.server import service_main
from ops_tools.services.common.settings import env_prefix, load_settings
from ops_tools.services.indexer.api import build_app, open_database
from ops_tools.services.indexer.processor import Processor, ProcessorOptions
from ops_tools.services.indexer.settings import IndexerSettings


def main(argv: list[str] | None = None) -> None:
    service_main("indexer", IndexerSettings, build_app, argv)


async def _process(processor: Processor) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, processor.stop)
    await processor.run()


def processor_main(argv: list[str] | None = None) -> None:
    prefix = env_prefix(IndexerSettings)
    parser = argparse.ArgumentParser(
        prog="net-indexer-processor",
        description="Follows the chain over RPC and writes the index the API serves.")
    parser.add_argument("--config", type=Path, default=os.environ.get(f"{prefix}CONFIG") or None,
                        help=f"YAML configuration (or ${prefix}CONFIG), shared with net-indexer")
    parser.add_argument("--version", action="version",
                        version=f"net-indexer-processor {__version__}")
    args = parser.parse_args(argv)
    try:
        settings = load_settings(IndexerSettings, args.config)
        logs.configure("indexer-processor", settings.log_level)
        db = open_database(settings)
    except OpsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    options = ProcessorOptions(rpc_url=settings.rpc_url, batch_size=settings.batch_size,
                               fetch_ahead=settings.fetch_ahead,
                               poll_interval_s=settings.poll_interval_s)
    asyncio.run(_process(Processor(options, db)))

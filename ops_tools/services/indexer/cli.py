"""The two programs: ``net-indexer --config F`` (the GraphQL API) and
``net-indexer-processor --config F`` (follows the chain and writes the index; it serves only
``/health``, ``/ready`` and ``/metrics`` of its own, on its own ``listen_port``)."""

from __future__ import annotations

from ops_tools.services.common.server import service_main
from ops_tools.services.indexer.app import build_app, build_processor_app
from ops_tools.services.indexer.config import IndexerSettings


def main(argv: list[str] | None = None) -> None:
    service_main("indexer", IndexerSettings, build_app, argv)


def processor_main(argv: list[str] | None = None) -> None:
    service_main("indexer-processor", IndexerSettings, build_processor_app, argv)

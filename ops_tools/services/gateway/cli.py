"""``net-gateway --config FILE``: the gateway on the service platform."""

from __future__ import annotations

from ops_tools.services.common.server import service_main
from ops_tools.services.gateway.app import build_app
from ops_tools.services.gateway.config import GatewaySettings


def main(argv: list[str] | None = None) -> None:
    service_main("gateway", GatewaySettings, build_app, argv)


if __name__ == "__main__":
    main()

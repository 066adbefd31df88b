"""``net-faucet --config FILE``: the faucet on the service platform."""

from __future__ import annotations

from ops_tools.services.common.server import service_main
from ops_tools.services.faucet.app import build_app
from ops_tools.services.faucet.config import FaucetSettings


def main(argv: list[str] | None = None) -> None:
    service_main("faucet", FaucetSettings, build_app, argv)


if __name__ == "__main__":
    main()

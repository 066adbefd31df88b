"""``net-explorer --config FILE``: the explorer on the service platform."""

from __future__ import annotations

from ops_tools.services.common.server import service_main
from ops_tools.services.explorer.app import build_app
from ops_tools.services.explorer.config import ExplorerSettings


def main(argv: list[str] | None = None) -> None:
    service_main("explorer", ExplorerSettings, build_app, argv)


if __name__ == "__main__":
    main()

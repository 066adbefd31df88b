"""``net-attestation --config FILE``: the attestation on the service platform."""

from __future__ import annotations

from ops_tools.services.attestation.app import build_app
from ops_tools.services.attestation.config import AttestationSettings
from ops_tools.services.common.server import service_main


def main(argv: list[str] | None = None) -> None:
    service_main("attestation", AttestationSettings, build_app, argv)


if __name__ == "__main__":
    main()

"""Which database a gateway uses, from its configuration file."""

from __future__ import annotations

from pathlib import Path

from ops_tools.services.common.settings import load_settings
from ops_tools.services.gateway.config import GatewaySettings


def database_url(config: Path) -> str:
    return load_settings(GatewaySettings, config).effective_database_url()

"""Which database a gateway of an inventory (or a configuration file) uses."""

from __future__ import annotations

from pathlib import Path

from ops_tools.errors import InputError
from ops_tools.services.gateway.settings import load


def database_url(inventory: Path | None, config: Path | None) -> str:
    if config is not None:
        return load(config).db_url()
    if inventory is not None:
        raise InputError(
            f"--inventory: {inventory}: reading a remote gateway's database is not supported"
            " yet; pass --config with that gateway's configuration file"
        )
    raise InputError("--config: no gateway configuration given; pass --config FILE")

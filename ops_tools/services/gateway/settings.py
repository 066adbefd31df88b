"""``net-gateway`` settings: the platform's common service fields plus the gateway's own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError

from ops_tools.errors import InputError
from ops_tools.services.gateway.config import GatewayFields


class GatewaySettings(GatewayFields):
    listen_host: str = "127.0.0.1"
    listen_port: int = Field(8005, ge=1, le=65535)
    database_url: str | None = None
    state_dir: Path = Path(".state/gateway")
    rpc_url: str = "ws://127.0.0.1:9944"
    genesis_hash: str | None = None
    max_body_bytes: int = Field(1_048_576, ge=1024)
    public_url: str | None = None
    log_level: str = "info"

    def db_url(self) -> str:
        return self.database_url or f"sqlite:///{self.state_dir / 'gateway.sqlite3'}"


def load(path: Path | None, overrides: dict[str, Any] | None = None) -> GatewaySettings:
    data: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise InputError(f"--config: cannot read {path} ({exc}); pass a YAML file") from exc
        if not isinstance(loaded, dict):
            raise InputError(f"--config: {path} is not a YAML mapping of settings")
        data.update(loaded)
    data.update({k: v for k, v in (overrides or {}).items() if v is not None})
    try:
        return GatewaySettings(**data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        shown = "<missing>" if first["type"] == "missing" else repr(first.get("input"))
        raise InputError(f"{field}: {shown}: {first['msg']}") from None



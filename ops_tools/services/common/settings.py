"""Service configuration: one YAML file per service, environment overrides, validated at start.

Precedence: environment (``NET_<SERVICE>_<KEY>``, nested keys joined with ``__``) over the YAML
file over the defaults. A bad value stops the service with one line naming the key, the value
and what is expected; values of secret fields are never printed.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, TypeVar

import yaml
from pydantic import Field, PlainValidator, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from ops_tools.errors import InputError

GENESIS_RE = re.compile(r"^0x[0-9a-f]{64}$")
IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _network(value: Any) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    if isinstance(value, ipaddress.IPv4Network | ipaddress.IPv6Network):
        return value
    try:
        return ipaddress.ip_network(str(value), strict=False)
    except ValueError:
        raise ValueError("expected an IP network such as 127.0.0.1/32 or 10.0.0.0/8") from None


Network = Annotated[ipaddress.IPv4Network | ipaddress.IPv6Network, PlainValidator(_network)]


class SettingsError(InputError):
    """The configuration is invalid; the message names the key, the value and what to do."""


class ServiceSettings(BaseSettings):
    """What every service is configured with. A service subclasses it, adds its own fields and
    sets ``service_name`` (the default database file and the environment prefix follow)."""

    service_name: ClassVar[str] = "service"
    # Fields whose values never appear in errors (their names end in _file when they point to
    # a secret file, which may be shown; these hold the secret itself).
    secret_fields: ClassVar[frozenset[str]] = frozenset()

    model_config = SettingsConfigDict(extra="forbid", env_nested_delimiter="__",
                                      validate_default=True)

    listen_host: str = "127.0.0.1"
    listen_port: int = Field(ge=1, le=65535)
    state_dir: Path
    database_url: str | None = None
    rpc_url: str = "ws://127.0.0.1:9944"
    genesis_hash: str | None = None
    trusted_proxies: list[Network] = []
    max_body_bytes: int = Field(default=64 * 1024, ge=256, le=64 * 1024 * 1024)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    public_url: str | None = None
    shutdown_timeout_s: float = Field(default=10.0, gt=0, le=300)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The YAML file arrives as init arguments; the environment must win over it.
        return (env_settings, init_settings)

    @field_validator("listen_host")
    @classmethod
    def _host(cls, value: str) -> str:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            raise ValueError("expected an IP address to listen on, such as 127.0.0.1") from None
        return value

    @field_validator("genesis_hash", mode="before")
    @classmethod
    def _genesis(cls, value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or not GENESIS_RE.match(value.lower()):
            raise ValueError("expected 0x and 64 hex digits (chain_getBlockHash [0]), or null")
        return value.lower()

    @field_validator("rpc_url", "public_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^(wss?|https?)://[^/\s]+", value):
            raise ValueError("expected a ws://, wss://, http:// or https:// URL")
        return value

    @field_validator("database_url")
    @classmethod
    def _db_url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^(sqlite|postgresql)(\+\w+)?://", value):
            raise ValueError("expected sqlite:///PATH or postgresql://USER@HOST:PORT/DB")
        return value

    def effective_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.state_dir / (self.service_name + '.db')}"


S = TypeVar("S", bound=ServiceSettings)


def env_prefix(cls: type[ServiceSettings]) -> str:
    return f"NET_{cls.service_name.upper().replace('-', '_')}_"


def load_settings(cls: type[S], config: Path | None) -> S:
    """Settings of ``cls`` from the YAML file ``config`` (optional) and the environment."""
    data: dict[str, Any] = {}
    if config is not None:
        try:
            loaded = yaml.safe_load(config.read_text(encoding="utf-8"))
        except OSError as exc:
            raise SettingsError(f"config: {config}: cannot read it ({exc.strerror})") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" line {mark.line + 1}" if mark else ""
            raise SettingsError(f"config: {config}:{where}: not valid YAML; fix it") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise SettingsError(
                f"config: {config}: expected a mapping of keys to values,"
                f" not a {type(loaded).__name__}"
            )
        data = loaded or {}
    prefix = env_prefix(cls)
    bound = type(cls.__name__, (cls,), {
        "model_config": {**cls.model_config, "env_prefix": prefix},
    })
    try:
        return bound(**data)  # type: ignore[return-value]
    except ValidationError as exc:
        raise SettingsError(describe(exc, cls, config, prefix)) from None


def describe(exc: ValidationError, cls: type[ServiceSettings], config: Path | None,
             prefix: str) -> str:
    """One line for the first problem: where it came from, the key, the value, what is wanted."""
    err = exc.errors(include_url=False)[0]
    # Pydantic adds validator names to the location of union members; people want the key.
    parts = [str(p) for p in err["loc"] if isinstance(p, int) or IDENT_RE.match(str(p))]
    key = ".".join(parts)
    top = str(err["loc"][0]) if err["loc"] else key
    env_name = prefix + top.upper()
    source = f"environment {env_name}" if env_name in os.environ else f"config {config or '-'}"
    if err["type"] == "extra_forbidden":
        known = ", ".join(sorted(cls.model_fields))
        return f"{source}: {key}: unknown key; expected one of: {known}"
    if err["type"] == "missing":
        return f"{source}: {key}: missing; set it in the config file or as {env_name}"
    value = "<hidden>" if top in cls.secret_fields else repr(err.get("input"))
    message = str(err["msg"]).removeprefix("Value error, ")
    return f"{source}: {key}: {value}: {message}"

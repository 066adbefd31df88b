"""Running a service: ``net-<service> --config FILE`` loads and validates the settings, runs the
migrations, and serves with uvicorn until SIGTERM or SIGINT, when it stops accepting, lets the
requests in flight finish (up to ``shutdown_timeout_s``) and then runs the app's shutdown."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import uvicorn
from fastapi import FastAPI

from ops_tools import __version__
from ops_tools.errors import OpsError
from ops_tools.services.common import logs
from ops_tools.services.common.settings import ServiceSettings, env_prefix, load_settings

S = TypeVar("S", bound=ServiceSettings)


def serve(app: FastAPI, settings: ServiceSettings) -> None:
    config = uvicorn.Config(
        app,
        host=settings.listen_host,
        port=settings.listen_port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=int(settings.shutdown_timeout_s),
        proxy_headers=False,  # client addresses come from clientip, trusted proxies only
        server_header=False,
        lifespan="on",
    )
    uvicorn.Server(config).run()


def service_main(
    name: str,
    settings_cls: type[S],
    build_app: Callable[[S], FastAPI],
    argv: list[str] | None = None,
) -> None:
    """The body of a service's console script. ``build_app`` runs the migrations and returns
    the app; anything it raises as an OpsError is one ``error:`` line and exit status 2."""
    parser = argparse.ArgumentParser(prog=f"net-{name}", description=f"The NET {name} service.")
    parser.add_argument(
        "--config", type=Path,
        default=os.environ.get(f"{env_prefix(settings_cls)}CONFIG") or None,
        help=f"YAML configuration (or ${env_prefix(settings_cls)}CONFIG); environment"
             f" variables {env_prefix(settings_cls)}<KEY> override it",
    )
    parser.add_argument("--check-config", action="store_true",
                        help="validate the configuration and exit")
    parser.add_argument("--version", action="version", version=f"net-{name} {__version__}")
    args = parser.parse_args(argv)
    try:
        settings = load_settings(settings_cls, args.config)
        logs.configure(name, settings.log_level)
        if args.check_config:
            print(f"net-{name}: configuration OK")
            return
        app = build_app(settings)
    except OpsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    serve(app, settings)

"""The app factory: a FastAPI app with what every service serves besides its own API.

``/health`` (the process is alive), ``/ready`` (every readiness check passes; else 503 with
``Retry-After`` and each check's result), ``/version``, ``/metrics`` (Prometheus), the OpenAPI
document at ``/openapi.json`` and ``/docs``; the middleware of :mod:`middleware`; the error shape
of :mod:`errors`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Literal

from fastapi import FastAPI, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from ops_tools import __version__
from ops_tools.services.common.errors import ApiError, install_error_handlers
from ops_tools.services.common.metrics import HttpMetrics
from ops_tools.services.common.middleware import ErrorBody, ServiceMiddleware, net_error_body
from ops_tools.services.common.readiness import CheckResult, ReadyCheck
from ops_tools.services.common.settings import ServiceSettings

READY_TIMEOUT_S = 5.0
READY_RETRY_AFTER_S = 5


@dataclass(frozen=True)
class ServiceInfo:
    name: str
    version: str = __version__
    description: str = ""


async def run_check(check: ReadyCheck) -> dict[str, Any]:
    try:
        if inspect.iscoroutinefunction(check.probe):
            result = await asyncio.wait_for(check.probe(), READY_TIMEOUT_S)
        else:
            result = await asyncio.wait_for(run_in_threadpool(check.probe), READY_TIMEOUT_S)
    except TimeoutError:
        result = CheckResult(False, f"no answer within {READY_TIMEOUT_S:g} s")
    assert isinstance(result, CheckResult)
    return {"name": check.name, "ok": result.ok, "detail": result.detail}


def create_app(
    info: ServiceInfo,
    settings: ServiceSettings,
    *,
    ready_checks: Sequence[ReadyCheck] = (),
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]] | None = None,
    error_shape: Literal["net", "own"] = "net",
    error_body: ErrorBody = net_error_body,
    json_only: bool = True,
    registry: CollectorRegistry | None = None,
) -> FastAPI:
    """``error_shape="own"`` leaves the exception handlers to the service (the gateway installs
    OpenAI's) and ``error_body`` shapes the middleware's own refusals (413, 415)."""
    app = FastAPI(title=f"net-{info.name}", version=info.version,
                  description=info.description, lifespan=lifespan)
    registry = registry or CollectorRegistry()
    app.state.settings = settings
    app.state.registry = registry
    app.state.ready_checks = list(ready_checks)
    if error_shape == "net":
        install_error_handlers(app)
    app.add_middleware(
        ServiceMiddleware,  # type: ignore[arg-type]
        metrics=HttpMetrics(registry, info.name),
        max_body_bytes=settings.max_body_bytes,
        json_only=json_only,
        error_body=error_body,
    )

    @app.get("/health", tags=["platform"], summary="The process is alive")
    async def health() -> dict[str, str]:
        return {"status": "ok", "service": info.name}

    @app.get("/ready", tags=["platform"], summary="Ready to serve: database, chain, genesis")
    async def ready() -> JSONResponse:
        checks = await asyncio.gather(*(run_check(c) for c in app.state.ready_checks))
        failed = [c for c in checks if not c["ok"]]
        if failed:
            message = "; ".join(f"{c['name']}: {c['detail']}" for c in failed)
            return ApiError(503, "not_ready", message, retry_after=READY_RETRY_AFTER_S,
                            checks=checks).response()
        return JSONResponse({"ready": True, "checks": checks})

    @app.get("/version", tags=["platform"], summary="Service name and version")
    async def version() -> dict[str, str]:
        return {"service": info.name, "version": info.version}

    @app.get("/metrics", tags=["platform"], summary="Prometheus metrics",
             response_class=Response)
    async def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return app

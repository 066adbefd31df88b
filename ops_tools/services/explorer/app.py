"""``net-explorer``: browse the attestation reports; plain HTML, works with JavaScript off.

    GET /                          reports, newest first; ?q= hash, ss58 account or operator id
    GET /reports/{hash}            every field decoded, live re-verification, on-chain anchor
    GET /reports/{hash}/report.json, /quote.bin, /gpu/{i}/evidence.bin, /gpu/{i}/certificate.pem
    GET /operators/{operator_id}   its reports and its registration on chain

The pages are ``pages.router``; this module builds the service around them.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ops_tools.services.common.app import ServiceInfo, create_app
from ops_tools.services.common.readiness import ChainWatch, CheckResult, ReadyCheck
from ops_tools.services.explorer import pages
from ops_tools.services.explorer.chain import ChainReader
from ops_tools.services.explorer.config import ExplorerSettings
from ops_tools.services.explorer.pages import ExplorerState, PageError, error_page
from ops_tools.services.explorer.upstream import AttestationApi, UpstreamError

log = logging.getLogger("ops_tools.services.explorer")


def build_app(settings: ExplorerSettings) -> FastAPI:
    api = AttestationApi(settings.attestation_url, settings.upstream_timeout_s)
    chain = ChainReader(settings.rpc_url, settings.anchor_cache_s, settings.upstream_timeout_s)
    watch = ChainWatch(settings.rpc_url, settings.genesis_hash)

    def upstream_ready() -> CheckResult:
        try:
            api.reports(limit=1)
        except UpstreamError as exc:
            return CheckResult(False, str(exc))
        return CheckResult(True, settings.attestation_url)

    app = create_app(
        ServiceInfo("explorer", description="Attestation explorer of the NET test network"),
        settings,
        ready_checks=[ReadyCheck("attestation", upstream_ready), watch.ready_check()],
        error_shape="own",
        json_only=False,
    )
    app.state.explorer = ExplorerState(api, chain, settings.page_size)
    install_error_pages(app)
    app.include_router(pages.router)
    return app


def install_error_pages(app: FastAPI) -> None:
    """Every error is a page that says what to do, never a JSON body or a stack trace."""

    @app.exception_handler(PageError)
    async def _page_error(request: Request, exc: PageError) -> HTMLResponse:
        return error_page(request, exc.status, exc.title, exc.message)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> HTMLResponse:
        if exc.status_code == 404:
            return error_page(request, 404, "Page not found",
                              f"{request.url.path} is not a page of this explorer.")
        return error_page(request, exc.status_code, "Request refused", str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> HTMLResponse:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ())[1:]) or "request"
        return error_page(request, 400, "Bad input", f"{where}: {err.get('msg', 'invalid')}")

    @app.exception_handler(UpstreamError)
    async def _upstream(request: Request, exc: UpstreamError) -> HTMLResponse:
        return error_page(request, 503, "Attestation service unavailable",
                          f"{exc}. Try again in a moment.")

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> HTMLResponse:
        log.error("unhandled error", exc_info=exc, extra={"path": request.url.path})
        rid = request.scope.get("net_request_id", "")
        return error_page(request, 500, "Something went wrong",
                          f"The explorer failed on this page; report request id {rid}.")

"""``net-explorer``: browse the attestation reports; plain HTML, works with JavaScript off.

    GET /                          reports, newest first; ?q= hash, ss58 account or operator id
    GET /reports/{hash}            every field decoded, live re-verification, on-chain anchor
    GET /reports/{hash}/report.json, /quote.bin, /gpu/{i}/evidence.bin, /gpu/{i}/certificate.pem
    GET /operators/{operator_id}   its reports and its registration on chain
"""

from __future__ import annotations

import base64
import json
import logging
import re
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException as StarletteHTTPException

from ops_tools.services.attestation import inputs
from ops_tools.services.attestation.tdx import TD_BODY_FIELDS
from ops_tools.services.common.app import ServiceInfo, create_app
from ops_tools.services.common.readiness import ChainWatch, CheckResult, ReadyCheck
from ops_tools.services.explorer.chain import ChainReader, ChainUnavailable, Registration
from ops_tools.services.explorer.config import ExplorerSettings
from ops_tools.services.explorer.upstream import AttestationApi, UpstreamError

log = logging.getLogger("ops_tools.services.explorer")
TEMPLATES = Path(__file__).parent / "templates"
_HASH_RE = re.compile(r"^0x[0-9a-fA-F]{64}$")
TD_SIZES = dict(TD_BODY_FIELDS)


class PageError(Exception):
    """An error shown as a page: status, a title and one sentence of what to do."""

    def __init__(self, status: int, title: str, message: str) -> None:
        super().__init__(message)
        self.status, self.title, self.message = status, title, message


def _classify(q: str) -> tuple[str, str]:
    """What a search term is: ("hash" | "account" | "operator_id", normalised value)."""
    term = q.strip()
    if _HASH_RE.fullmatch(term):
        return "hash", term.lower()
    if term.lower().startswith("0x"):
        raise PageError(400, "Not a report hash",
                        f"{term[:80]!r} starts with 0x but is not 0x and 64 hex digits;"
                        " a report hash is an H256")
    try:
        if inputs.account(term):
            return "account", term
    except inputs.FieldError:
        pass
    try:
        return "operator_id", inputs.operator_id(term)
    except inputs.FieldError as exc:
        raise PageError(400, "Not a valid search", f"search: {exc.message}. Search by a"
                        " report hash, an ss58 account or an operator id") from None


def _b64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"))


def build_app(settings: ExplorerSettings) -> FastAPI:
    api = AttestationApi(settings.attestation_url, settings.upstream_timeout_s)
    chain = ChainReader(settings.rpc_url, settings.anchor_cache_s)
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
    templates = Jinja2Templates(directory=str(TEMPLATES))

    def page(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        return templates.TemplateResponse(request, name, context, status_code=status)

    def error_page(request: Request, status: int, title: str, message: str) -> HTMLResponse:
        return page(request, "error.html", status, title=title, message=message, code=status)

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

    def get_report(report_hash: str) -> dict[str, Any]:
        if not _HASH_RE.fullmatch(report_hash):
            raise PageError(400, "Not a report hash",
                            f"{report_hash[:80]!r} is not 0x and 64 hex digits; a report hash"
                            " is an H256")
        found = api.report(report_hash.lower())
        if found is None:
            raise PageError(404, "No such report",
                            f"No report has hash {report_hash.lower()}. It may be mistyped, or"
                            " issued by another deployment.")
        return found

    def anchors(reader: Any, *args: Any) -> tuple[Any, str | None]:
        try:
            return reader(*args), None
        except ChainUnavailable as exc:
            return None, str(exc)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index(request: Request, q: str = "", cursor: str | None = None) -> Response:
        kind, value = _classify(q) if q.strip() else ("", "")
        if kind == "hash":
            get_report(value)  # a clear 404 page here rather than a redirect to one
            return RedirectResponse(f"/reports/{value}", status_code=303)
        try:
            listing = api.reports(
                operator_id=value if kind == "operator_id" else None,
                account=value if kind == "account" else None,
                limit=settings.page_size, cursor=cursor,
            )
        except UpstreamError as exc:
            if "cursor" in str(exc):
                raise PageError(400, "Bad page link", "The page cursor is not one this"
                                " explorer handed out; start again from the newest.") from None
            raise
        return page(request, "list.html", q=q.strip(), kind=kind, listing=listing,
                    cursor=cursor)

    @app.get("/reports/{report_hash}", response_class=HTMLResponse, include_in_schema=False)
    def report_page(request: Request, report_hash: str) -> Response:
        found = get_report(report_hash)
        report = found["report"]
        verdict = api.verify(report)
        carrying, chain_error = anchors(chain.carrying, report["hash"])
        return page(request, "report.html", report=report, network=found["network"],
                    verdict=verdict, carrying=carrying, chain_error=chain_error,
                    td_sizes=TD_SIZES, quote_size=len(_b64(report["quote"])))

    @app.get("/reports/{report_hash}/report.json", include_in_schema=False)
    def report_json(report_hash: str) -> Response:
        report = get_report(report_hash)["report"]
        return Response(json.dumps(report, indent=2), media_type="application/json",
                        headers=_attachment(f"report-{report['hash'][2:18]}.json"))

    @app.get("/reports/{report_hash}/quote.bin", include_in_schema=False)
    def quote_bin(report_hash: str) -> Response:
        report = get_report(report_hash)["report"]
        return Response(_b64(report["quote"]), media_type="application/octet-stream",
                        headers=_attachment(f"tdx-quote-{report['hash'][2:18]}.bin"))

    def gpu_item(report: dict[str, Any], index: int) -> dict[str, Any]:
        for item in report["gpu_evidence"]:
            if item["index"] == index:
                return item
        raise PageError(404, "No such GPU", f"This report has no GPU {index}.")

    @app.get("/reports/{report_hash}/gpu/{index}/evidence.bin", include_in_schema=False)
    def gpu_evidence(report_hash: str, index: int) -> Response:
        report = get_report(report_hash)["report"]
        item = gpu_item(report, index)
        return Response(_b64(item["evidence"]), media_type="application/octet-stream",
                        headers=_attachment(f"gpu{index}-spdm-{report['hash'][2:18]}.bin"))

    @app.get("/reports/{report_hash}/gpu/{index}/certificate.pem", include_in_schema=False)
    def gpu_certificate(report_hash: str, index: int) -> Response:
        report = get_report(report_hash)["report"]
        item = gpu_item(report, index)
        return Response(_b64(item["certificate"]), media_type="application/x-pem-file",
                        headers=_attachment(f"gpu{index}-chain-{report['hash'][2:18]}.pem"))

    @app.get("/operators/{operator_id}", response_class=HTMLResponse, include_in_schema=False)
    def operator_page(request: Request, operator_id: str, cursor: str | None = None) -> Response:
        try:
            op = inputs.operator_id(operator_id)
        except inputs.FieldError as exc:
            raise PageError(400, "Not a valid operator id", exc.message) from None
        listing = api.reports(operator_id=op, limit=settings.page_size, cursor=cursor)
        accounts = sorted({r["account"] for r in listing["reports"] if r["account"]})
        registrations: list[tuple[str, Registration | None]] = []
        chain_error = None
        for account in accounts:
            found, chain_error = anchors(chain.registration, account)
            if chain_error:
                break
            registrations.append((account, found))
        return page(request, "operator.html", operator_id=op, listing=listing,
                    registrations=registrations, chain_error=chain_error, cursor=cursor)

    return app


def _attachment(filename: str) -> dict[str, str]:
    return {"Content-Disposition": f'attachment; filename="{filename}"'}


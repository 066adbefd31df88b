"""The explorer's pages (an ``APIRouter``): each reads what it shows from the attestation service
and the chain held in ``request.app.state.explorer`` (``app.ExplorerState``)."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from ops_tools.attestation import inputs
from ops_tools.attestation.tdx import TD_BODY_FIELDS
from ops_tools.services.explorer.chain import ChainReader, ChainUnavailable, Registration
from ops_tools.services.explorer.upstream import AttestationApi, UpstreamError

TEMPLATES = Path(__file__).parent / "templates"
_HASH_RE = re.compile(r"^0x[0-9a-fA-F]{64}$")
TD_SIZES = dict(TD_BODY_FIELDS)

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=str(TEMPLATES))


@dataclass(frozen=True)
class ExplorerState:
    api: AttestationApi
    chain: ChainReader
    page_size: int


class PageError(Exception):
    """An error shown as a page: status, a title and one sentence of what to do."""

    def __init__(self, status: int, title: str, message: str) -> None:
        super().__init__(message)
        self.status, self.title, self.message = status, title, message


def page(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    return templates.TemplateResponse(request, name, context, status_code=status)


def error_page(request: Request, status: int, title: str, message: str) -> HTMLResponse:
    return page(request, "error.html", status, title=title, message=message, code=status)


def _state(request: Request) -> ExplorerState:
    return request.app.state.explorer  # type: ignore[no-any-return]


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


def get_report(state: ExplorerState, report_hash: str) -> dict[str, Any]:
    if not _HASH_RE.fullmatch(report_hash):
        raise PageError(400, "Not a report hash",
                        f"{report_hash[:80]!r} is not 0x and 64 hex digits; a report hash"
                        " is an H256")
    found = state.api.report(report_hash.lower())
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


@router.get("/", response_class=HTMLResponse)
def index(request: Request, q: str = "", cursor: str | None = None) -> Response:
    state = _state(request)
    kind, value = _classify(q) if q.strip() else ("", "")
    if kind == "hash":
        get_report(state, value)  # a clear 404 page here rather than a redirect to one
        return RedirectResponse(f"/reports/{value}", status_code=303)
    try:
        listing = state.api.reports(
            operator_id=value if kind == "operator_id" else None,
            account=value if kind == "account" else None,
            limit=state.page_size, cursor=cursor,
        )
    except UpstreamError as exc:
        if "cursor" in str(exc):
            raise PageError(400, "Bad page link", "The page cursor is not one this"
                            " explorer handed out; start again from the newest.") from None
        raise
    return page(request, "list.html", q=q.strip(), kind=kind, listing=listing,
                cursor=cursor)


@router.get("/reports/{report_hash}", response_class=HTMLResponse)
def report_page(request: Request, report_hash: str) -> Response:
    state = _state(request)
    found = get_report(state, report_hash)
    report = found["report"]
    verdict = state.api.verify(report)
    carrying, chain_error = anchors(state.chain.carrying, report["hash"])
    return page(request, "report.html", report=report, network=found["network"],
                verdict=verdict, carrying=carrying, chain_error=chain_error,
                td_sizes=TD_SIZES, quote_size=len(_b64(report["quote"])))


@router.get("/reports/{report_hash}/report.json")
def report_json(request: Request, report_hash: str) -> Response:
    report = get_report(_state(request), report_hash)["report"]
    return Response(json.dumps(report, indent=2), media_type="application/json",
                    headers=_attachment(f"report-{report['hash'][2:18]}.json"))


@router.get("/reports/{report_hash}/quote.bin")
def quote_bin(request: Request, report_hash: str) -> Response:
    report = get_report(_state(request), report_hash)["report"]
    return Response(_b64(report["quote"]), media_type="application/octet-stream",
                    headers=_attachment(f"tdx-quote-{report['hash'][2:18]}.bin"))


def gpu_item(report: dict[str, Any], index: int) -> dict[str, Any]:
    for item in report["gpu_evidence"]:
        if item["index"] == index:
            return item
    raise PageError(404, "No such GPU", f"This report has no GPU {index}.")


@router.get("/reports/{report_hash}/gpu/{index}/evidence.bin")
def gpu_evidence(request: Request, report_hash: str, index: int) -> Response:
    report = get_report(_state(request), report_hash)["report"]
    item = gpu_item(report, index)
    return Response(_b64(item["evidence"]), media_type="application/octet-stream",
                    headers=_attachment(f"gpu{index}-spdm-{report['hash'][2:18]}.bin"))


@router.get("/reports/{report_hash}/gpu/{index}/certificate.pem")
def gpu_certificate(request: Request, report_hash: str, index: int) -> Response:
    report = get_report(_state(request), report_hash)["report"]
    item = gpu_item(report, index)
    return Response(_b64(item["certificate"]), media_type="application/x-pem-file",
                    headers=_attachment(f"gpu{index}-chain-{report['hash'][2:18]}.pem"))


@router.get("/operators/{operator_id}", response_class=HTMLResponse)
def operator_page(request: Request, operator_id: str, cursor: str | None = None) -> Response:
    state = _state(request)
    try:
        op = inputs.operator_id(operator_id)
    except inputs.FieldError as exc:
        raise PageError(400, "Not a valid operator id", exc.message) from None
    listing = state.api.reports(operator_id=op, limit=state.page_size, cursor=cursor)
    accounts = sorted({r["account"] for r in listing["reports"] if r["account"]})
    registrations: list[tuple[str, Registration | None]] = []
    chain_error = None
    for account in accounts:
        found, chain_error = anchors(state.chain.registration, account)
        if chain_error:
            break
        registrations.append((account, found))
    return page(request, "operator.html", operator_id=op, listing=listing,
                registrations=registrations, chain_error=chain_error, cursor=cursor)


def _attachment(filename: str) -> dict[str, str]:
    return {"Content-Disposition": f'attachment; filename="{filename}"'}


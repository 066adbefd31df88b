"""The attestation service's routes (an ``APIRouter``); the work is ``service.Attestation``,
held in ``request.app.state.attestation``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Request

from ops_tools.services.attestation.service import Attestation, AttestRequest
from ops_tools.services.common.clientip import client_ip

router = APIRouter(tags=["attestation"])


def _service(request: Request) -> Attestation:
    return request.app.state.attestation  # type: ignore[no-any-return]


@router.post("/v1/attest", status_code=201,
             summary="Issue a mock attestation report for an operator")
def attest(body: AttestRequest, request: Request) -> dict[str, Any]:
    service = _service(request)
    peer = request.client.host if request.client else "unknown"
    ip = client_ip(peer, request.headers.getlist("x-forwarded-for"),
                   service.settings.trusted_proxies)
    return service.attest(body, ip)


@router.get("/v1/reports/{report_hash}", summary="One report by hash")
def get_report(report_hash: str, request: Request) -> dict[str, Any]:
    return _service(request).get_report(report_hash)


@router.get("/v1/reports", summary="Reports, newest first")
def list_reports(request: Request, operator_id: str | None = None, account: str | None = None,
                 limit: int | None = None, cursor: str | None = None) -> dict[str, Any]:
    return _service(request).list_reports(operator_id, account, limit, cursor)


@router.post("/v1/verify", summary="Re-verify a report from its raw bytes")
def verify(request: Request, body: dict[str, Any] = Body(...)) -> dict[str, Any]:  # noqa: B008
    return _service(request).verify(body)


@router.get("/v1/roots", summary="The MOCK root certificates")
def roots(request: Request) -> dict[str, Any]:
    return _service(request).roots()

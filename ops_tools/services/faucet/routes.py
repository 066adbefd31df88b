"""The faucet's routes (an ``APIRouter``); the work is ``service.Faucet``, held in
``request.app.state.faucet``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
from fastapi import APIRouter, Header, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from ops_tools.services.common.clientip import client_ip
from ops_tools.services.common.errors import ApiError
from ops_tools.services.faucet.service import Faucet, Started

NDJSON = "application/x-ndjson"

router = APIRouter(tags=["faucet"])


class DripRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    recipient: str = Field(
        description="The account to fund: an ss58 address with this network's prefix (42).",
        examples=["5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"],
        max_length=128,
    )


class Amount(BaseModel):
    plancks: str = Field(description="Integer, as a string (exceeds JSON's safe integers).")
    tokens: str
    symbol: str
    decimals: int


class DripResult(BaseModel):
    recipient: str
    amount: Amount
    extrinsic_hash: str
    block_hash: str = Field(description="The block in which the transfer was included.")
    block_number: int
    genesis_hash: str
    next_drip_at: str = Field(description="When this recipient may ask again (UTC, ISO 8601).")
    retry_after_s: int


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="allow")
    code: str
    message: str


class ErrorBody(BaseModel):
    error: ErrorDetail


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text}
    for status, text in {
        400: "A field is missing, unknown or invalid (the error names it)",
        403: "The recipient already holds more than the balance cap",
        409: "A request with this Idempotency-Key still runs after inclusion_timeout_s, or its"
             " outcome is unknown",
        413: "The body is over 1 KiB",
        415: "The body is not application/json",
        422: "The Idempotency-Key was used for another recipient",
        429: "A limit is reached (per recipient, per client IP, global); see Retry-After",
        502: "The node refused the transfer, it failed in its block, or the chain used its nonce"
             " for another transaction; nothing was sent",
        503: "The chain or the database is unreachable, on another genesis, the faucet is"
             " empty, or this instance does not hold its signer's lease",
        504: "Submitted, but not seen in a block in time",
    }.items()
}


def _faucet(request: Request) -> Faucet:
    return request.app.state.faucet  # type: ignore[no-any-return]


def _line(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj) + b"\n"


@router.get("/info", summary="The faucet's address, drip and limits")
async def info(request: Request) -> dict[str, Any]:
    faucet = _faucet(request)
    settings = faucet.settings
    lim = settings.limits
    return {
        "address": faucet.signer.address,
        "genesis_hash": faucet.watch.expected,
        "drip": {"plancks": str(settings.drip_plancks), "symbol": settings.token_symbol,
                 "decimals": settings.token_decimals},
        "balance_plancks": None if (b := faucet.known_balance()) is None else str(b),
        "limits": {
            "per_recipient": {"count": 1, "window_s": lim.recipient_window_s},
            "per_ip": {"count": lim.per_ip.count, "window_s": lim.per_ip.window_s},
            "global_per_hour": lim.global_per_hour,
            "balance_cap_plancks": str(lim.balance_cap_plancks),
        },
    }


@router.post(
    "/drip-public",
    summary="Send a small amount of the token to an account",
    response_model=DripResult,
    responses={**ERRORS, 200: {"content": {NDJSON: {}}, "description": (
        "The drip, included in a block. With Accept: application/x-ndjson, one line per"
        " step (submitted, included, finalized) and then this object.")}},
)
async def drip(
    body: DripRequest,
    request: Request,
    idempotency_key: str | None = Header(default=None, alias="Idempotency-Key"),
) -> Any:
    faucet = _faucet(request)
    outcome = "error"
    peer = request.client.host if request.client else ""
    ip = client_ip(peer, request.headers.getlist("x-forwarded-for"),
                   faucet.settings.trusted_proxies)
    try:
        started = await run_in_threadpool(faucet.start, body.recipient, ip, idempotency_key)
        if NDJSON in request.headers.get("accept", ""):
            outcome = "streamed"
            return StreamingResponse(_progress(faucet, started), media_type=NDJSON)
        result = await run_in_threadpool(faucet.finish, started)
        outcome = "replayed" if started.replay is not None else "dripped"
        return result
    except ApiError as exc:
        outcome = exc.code
        raise
    finally:
        faucet.metrics.requests.labels(outcome).inc()


async def _progress(faucet: Faucet, started: Started) -> AsyncIterator[bytes]:
    if started.replay is not None:
        yield _line(started.replay)
        return
    assert started.ticket is not None
    yield _line({"status": "submitted", "recipient": started.recipient,
                 "extrinsic_hash": started.ticket.extrinsic_hash,
                 "genesis_hash": started.genesis})
    try:
        result = await run_in_threadpool(faucet.finish, started)
    except ApiError as exc:
        # The status line is gone already; the stream ends with the error object.
        yield _line(exc.body())
        return
    yield _line({"status": "included", "block_hash": result["block_hash"],
                 "block_number": result["block_number"]})
    final = await run_in_threadpool(faucet.wait_finalized, started)
    yield _line({"status": "finalized" if final else "finality_timeout",
                 "block_hash": result["block_hash"], "block_number": result["block_number"]})
    yield _line(result)

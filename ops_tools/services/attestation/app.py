"""``net-attestation``: issues mock attestation reports, keeps them, lists and re-verifies them.

    POST /v1/attest             {"operator_id", "account"?, "nonce"?, "signed_at"?, "signature"?}
                                -> 201, the report
    GET  /v1/reports/{hash}     -> {"report", "network": {"genesis_hash", "earlier"}}
    GET  /v1/reports            ?operator_id=&account=&limit=&cursor= -> newest first
    POST /v1/verify             a report, or {"report", "expected"?} -> {"valid", "checks"}
    GET  /v1/roots              the mock root certificate(s) the reports chain up to
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any

from fastapi import Body, FastAPI, Request
from prometheus_client import Counter
from pydantic import BaseModel, ConfigDict
from sqlalchemy.exc import IntegrityError

from ops_tools.chain.rpc import RpcError
from ops_tools.errors import InputError
from ops_tools.services.attestation import inputs, signed_request
from ops_tools.services.attestation import store as reports
from ops_tools.services.attestation.config import AttestationSettings
from ops_tools.services.attestation.gpu import GpuProfile
from ops_tools.services.attestation.pki import MockPki
from ops_tools.services.attestation.report import IssueRequest, issue
from ops_tools.services.attestation.verify import Expected, Trust, verify_report
from ops_tools.services.common import logs
from ops_tools.services.common.app import ServiceInfo, create_app
from ops_tools.services.common.clientip import client_ip
from ops_tools.services.common.db import Database
from ops_tools.services.common.errors import ApiError, bad_field
from ops_tools.services.common.hashing import load_or_create_salt
from ops_tools.services.common.migrations import migrate
from ops_tools.services.common.ratelimit import LimitExceeded, RateLimiter, Rule
from ops_tools.services.common.readiness import ChainWatch, database_check
from ops_tools.services.common.secrets import read_secret

log = logging.getLogger("ops_tools.services.attestation")
MIGRATIONS = Path(__file__).parent / "migrations"
VERSION_TABLE = "attest_alembic_version"


class AttestRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    operator_id: str
    account: str | None = None
    nonce: str | None = None
    # Both or neither: a request signed by ``account`` counts against that account's limit.
    signed_at: int | None = None
    signature: str | None = None


def _field(exc: inputs.FieldError) -> ApiError:
    return bad_field(exc.field, exc.message)


def load_pki(settings: AttestationSettings) -> MockPki:
    seed = read_secret(settings.mock_root_seed_file, key="mock_root_seed_file")
    logs.redact(seed)
    try:
        return MockPki(seed.encode("utf-8"))
    except ValueError as exc:
        raise inputs.FieldError("mock_root_seed_file", str(exc)) from None


def _rate_limited(exc: LimitExceeded) -> ApiError:
    return ApiError(
        429, "rate_limited",
        f"{exc.rule}: at most {exc.limit} reports per {exc.window_s:g} s;"
        f" retry in {exc.retry_after} s",
        retry_after=exc.retry_after, rule=exc.rule,
    )


def build_app(settings: AttestationSettings, *, clock: Any = None) -> FastAPI:
    now = clock or (lambda: dt.datetime.now(dt.UTC))
    try:
        pki = load_pki(settings)
    except inputs.FieldError as exc:
        raise InputError(str(exc)) from None
    db = Database(settings.effective_database_url())
    migrate(db, MIGRATIONS, version_table=VERSION_TABLE)
    store = reports.ReportStore(db)
    salt = load_or_create_salt(settings.state_dir / "salt")
    limiter = RateLimiter(db, reports.rate_events, salt)
    watch = ChainWatch(settings.rpc_url, settings.genesis_hash)
    trust = Trust((pki.root,), settings.accept_mock_root)
    profile = GpuProfile(settings.gpu_model, settings.gpu_driver_version,
                         settings.gpu_vbios_version)
    app = create_app(
        ServiceInfo("attestation", description="Mock attestation reports of the NET test network"
                    " (TDX v4 quote plus GPU evidence, chained to a MOCK root)."),
        settings,
        ready_checks=[database_check(db), watch.ready_check()],
    )
    issued = Counter("attestation_reports_issued_total", "Reports issued",
                     registry=app.state.registry)
    verified = Counter("attestation_verifications_total", "Verify calls by outcome",
                       ["valid"], registry=app.state.registry)
    app.state.store = store
    app.state.pki = pki

    def genesis() -> str:
        """The network a new report is for: the one this service was started for, while the
        chain still serves it (after a reset the service is restarted for the new one)."""
        try:
            serving = watch.current_genesis()
        except RpcError as exc:
            raise ApiError(503, "chain_unavailable", f"the chain does not answer: {exc}",
                           retry_after=5) from None
        if serving != watch.expected:
            raise ApiError(503, "network_reset", f"the chain now serves genesis {serving}, not"
                           f" {watch.expected}; the service restarts for the new network",
                           retry_after=5)
        return serving

    def current_genesis_or_none() -> str | None:
        try:
            return watch.current_genesis()
        except RpcError:
            return None

    @app.post("/v1/attest", status_code=201, tags=["attestation"],
              summary="Issue a mock attestation report for an operator")
    def attest(body: AttestRequest, request: Request) -> dict[str, Any]:
        try:
            operator_id = inputs.operator_id(body.operator_id)
            account = inputs.account(body.account)
            nonce = inputs.nonce(body.nonce)
        except inputs.FieldError as exc:
            raise _field(exc) from None
        network = genesis()
        signer = _signer(body, operator_id, account, nonce, network)
        peer = request.client.host if request.client else "unknown"
        ip = client_ip(peer, request.headers.getlist("x-forwarded-for"),
                       settings.trusted_proxies)
        reservations = _reserve(ip, signer, network)
        try:
            report = issue(pki, IssueRequest(
                operator_id=operator_id, account=account, nonce=nonce, genesis_hash=network,
                issued_at=now(), ttl=dt.timedelta(seconds=settings.report_ttl_s),
                gpus=[profile] * settings.gpu_count,
            ))
            store.add(report)
        except IntegrityError:
            # The same request within the same second: signing is deterministic, so this is
            # byte for byte the report already stored. Hand it out again; it counts once.
            for reservation in reservations:
                limiter.release(reservation)
            return report
        except BaseException:
            for reservation in reservations:
                limiter.release(reservation)
            raise
        for reservation in reservations:
            limiter.commit(reservation)
        issued.inc()
        log.info("report issued", extra={"hash": report["hash"], "operator_id": operator_id})
        return report

    def _signer(body: AttestRequest, operator_id: str, account: str | None, nonce: bytes,
                network: str) -> signed_request.SignedBy | None:
        if body.signature is None and body.signed_at is None:
            return None
        try:
            return signed_request.check(
                operator_id=operator_id, account=account,
                nonce=nonce if body.nonce is not None else None, signed_at=body.signed_at,
                signature=body.signature, genesis_hash=network, now=now().timestamp())
        except inputs.FieldError as exc:
            raise _field(exc) from None

    def _reserve(ip: str, signer: signed_request.SignedBy | None, network: str) -> list[str]:
        """The limits of the requester, never of a name it chose: an unsigned request counts
        against its client address; a signed one against its account (only the key's holder
        can spend that) and a separate per-address budget of signed requests, so nobody's
        unsigned requests, for whatever operator id, reach it. A signed (account, nonce) is
        accepted once: a replay is refused before it counts."""
        window = settings.limit_window_s
        if signer is None:
            rules = [Rule("ip", ip, settings.ip_limit, window)]
            try:
                return [limiter.reserve(rules, network)]
            except LimitExceeded as exc:
                raise _rate_limited(exc) from None
        once = Rule("signed_request", f"{signer.account}:{signer.nonce.hex()}", 1,
                    2 * signed_request.MAX_SKEW_S)
        try:
            first = limiter.reserve([once], network)
        except LimitExceeded:
            raise ApiError(409, "replayed_request",
                           f"a signed request of {signer.account} with this nonce was already"
                           " answered; sign a new request with a fresh nonce",
                           field="nonce") from None
        rules = [Rule("account", signer.account, settings.account_limit, window),
                 Rule("signed_ip", ip, settings.signed_ip_limit, window)]
        try:
            return [first, limiter.reserve(rules, network)]
        except LimitExceeded as exc:
            limiter.release(first)  # refused, not answered: the same request may come back
            raise _rate_limited(exc) from None

    @app.get("/v1/reports/{report_hash}", tags=["attestation"], summary="One report by hash")
    def get_report(report_hash: str) -> dict[str, Any]:
        try:
            key = inputs.report_hash(report_hash)
        except inputs.FieldError as exc:
            raise _field(exc) from None
        report = store.get(key)
        if report is None:
            raise ApiError(404, "not_found", f"no report has hash {key}", hash=key)
        current = current_genesis_or_none()
        return {
            "report": report,
            "network": {
                "genesis_hash": current,
                "earlier": current is not None and report["genesis_hash"] != current,
            },
        }

    @app.get("/v1/reports", tags=["attestation"], summary="Reports, newest first")
    def list_reports(operator_id: str | None = None, account: str | None = None,
                     limit: int | None = None, cursor: str | None = None) -> dict[str, Any]:
        try:
            op = inputs.operator_id(operator_id) if operator_id else None
            acct = inputs.account(account) if account else None
            size = inputs.limit(limit)
            before = inputs.cursor(cursor)
        except inputs.FieldError as exc:
            raise _field(exc) from None
        rows, next_cursor = store.page(operator_id=op, account=acct, limit=size, before=before)
        current = current_genesis_or_none()
        return {
            "reports": [r.to_json(current) for r in rows],
            "next_cursor": next_cursor,
            "current_genesis": current,
        }

    @app.post("/v1/verify", tags=["attestation"],
              summary="Re-verify a report from its raw bytes")
    def verify(body: dict[str, Any] = Body(...)) -> dict[str, Any]:  # noqa: B008
        report, expected = _verify_input(body)
        verdict = verify_report(report, trust, now=now(),
                                genesis_hash=current_genesis_or_none(), expected=expected)
        verified.labels(valid=str(verdict.valid).lower()).inc()
        return verdict.to_json()

    @app.get("/v1/roots", tags=["attestation"], summary="The MOCK root certificates")
    def roots() -> dict[str, Any]:
        return {"mock": True, "accept_mock_root": settings.accept_mock_root,
                "roots": pki.roots_json()}

    return app


def _verify_input(body: dict[str, Any]) -> tuple[Any, Expected | None]:
    """A bare report, or ``{"report": ..., "expected": {...}}``."""
    if "report" not in body:
        return body, None
    unknown = set(body) - {"report", "expected"}
    if unknown:
        name = sorted(unknown)[0]
        raise ApiError(400, "unknown_field", f"{name}: unknown field; send report and"
                       " optionally expected", field=name)
    raw = body.get("expected") or {}
    if not isinstance(raw, dict) or set(raw) - {"operator_id", "account", "nonce"}:
        raise bad_field("expected", "give an object with operator_id, account and/or nonce")
    for key, value in raw.items():
        if value is not None and not isinstance(value, str):
            raise bad_field(f"expected.{key}", "must be a string")
    return body["report"], Expected(raw.get("operator_id"), raw.get("account"), raw.get("nonce"))


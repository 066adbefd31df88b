"""The attestation service's logic behind its routes (``routes.py``): issuing a report within the
requester's limits, reading and re-verifying reports. One instance per app
(``app.state.attestation``)."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter
from pydantic import BaseModel, ConfigDict
from sqlalchemy.exc import IntegrityError

from ops_tools.attestation import inputs
from ops_tools.attestation.gpu import GpuProfile
from ops_tools.attestation.verify import Expected, Trust, verify_report
from ops_tools.chain.rpc import RpcError
from ops_tools.services.attestation import signed_request
from ops_tools.services.attestation import store as reports
from ops_tools.services.attestation.config import AttestationSettings
from ops_tools.services.attestation.pki import MockPki
from ops_tools.services.attestation.report import IssueRequest, issue
from ops_tools.services.common.errors import ApiError, bad_field
from ops_tools.services.common.ratelimit import LimitExceeded, RateLimiter, Rule
from ops_tools.services.common.readiness import ChainWatch

log = logging.getLogger("ops_tools.services.attestation")


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


def _rate_limited(exc: LimitExceeded) -> ApiError:
    return ApiError(
        429, "rate_limited",
        f"{exc.rule}: at most {exc.limit} reports per {exc.window_s:g} s;"
        f" retry in {exc.retry_after} s",
        retry_after=exc.retry_after, rule=exc.rule,
    )


class Attestation:
    def __init__(self, settings: AttestationSettings, *, pki: MockPki,
                 store: reports.ReportStore, limiter: RateLimiter, watch: ChainWatch,
                 now: Callable[[], dt.datetime], registry: CollectorRegistry) -> None:
        self.settings, self.pki, self.store = settings, pki, store
        self.limiter, self.watch, self.now = limiter, watch, now
        self.trust = Trust((pki.root,), settings.accept_mock_root)
        self.profile = GpuProfile(settings.gpu_model, settings.gpu_driver_version,
                                  settings.gpu_vbios_version)
        self.issued = Counter("attestation_reports_issued_total", "Reports issued",
                              registry=registry)
        self.verified = Counter("attestation_verifications_total", "Verify calls by outcome",
                                ["valid"], registry=registry)
        # The service's own failures to issue (not the client's bad input or limits): the chain,
        # a reset under it, signing or storing (roles/monitoring: AttestationIssueErrors).
        self.issue_errors = Counter("attestation_issue_errors_total", "Attest requests failed on"
                                    " the service's side, by reason", ["reason"], registry=registry)

    def genesis(self) -> str:
        """The network a new report is for: the one this service was started for, while the
        chain still serves it (after a reset the service is restarted for the new one)."""
        try:
            serving = self.watch.current_genesis()
        except RpcError as exc:
            raise ApiError(503, "chain_unavailable", f"the chain does not answer: {exc}",
                           retry_after=5) from None
        if serving != self.watch.expected:
            raise ApiError(503, "network_reset", f"the chain now serves genesis {serving}, not"
                           f" {self.watch.expected}; the service restarts for the new network",
                           retry_after=5)
        return serving

    def current_genesis_or_none(self) -> str | None:
        try:
            return self.watch.current_genesis()
        except RpcError:
            return None

    def attest(self, body: AttestRequest, ip: str) -> dict[str, Any]:
        try:
            operator_id = inputs.operator_id(body.operator_id)
            account = inputs.account(body.account)
            nonce = inputs.nonce(body.nonce)
        except inputs.FieldError as exc:
            raise _field(exc) from None
        try:
            network = self.genesis()
        except ApiError as exc:
            self.issue_errors.labels(reason=exc.code).inc()
            raise
        signer = self._signer(body, operator_id, account, nonce, network)
        reservations = self._reserve(ip, signer, network)
        try:
            report = issue(self.pki, IssueRequest(
                operator_id=operator_id, account=account, nonce=nonce, genesis_hash=network,
                issued_at=self.now(), ttl=dt.timedelta(seconds=self.settings.report_ttl_s),
                gpus=[self.profile] * self.settings.gpu_count,
            ))
            self.store.add(report)
        except IntegrityError:
            # The same request within the same second: signing is deterministic, so this is
            # byte for byte the report already stored. Hand it out again; it counts once.
            for reservation in reservations:
                self.limiter.release(reservation)
            return report
        except BaseException:
            for reservation in reservations:
                self.limiter.release(reservation)
            self.issue_errors.labels(reason="issue").inc()
            raise
        for reservation in reservations:
            self.limiter.commit(reservation)
        self.issued.inc()
        log.info("report issued", extra={"hash": report["hash"], "operator_id": operator_id})
        return report

    def _signer(self, body: AttestRequest, operator_id: str, account: str | None,
                nonce: bytes, network: str) -> signed_request.SignedBy | None:
        if body.signature is None and body.signed_at is None:
            return None
        try:
            return signed_request.check(
                operator_id=operator_id, account=account,
                nonce=nonce if body.nonce is not None else None, signed_at=body.signed_at,
                signature=body.signature, genesis_hash=network, now=self.now().timestamp())
        except inputs.FieldError as exc:
            raise _field(exc) from None

    def _reserve(self, ip: str, signer: signed_request.SignedBy | None,
                 network: str) -> list[str]:
        """The limits of the requester, never of a name it chose: an unsigned request counts
        against its client address; a signed one against its account (only the key's holder
        can spend that) and a separate per-address budget of signed requests, so nobody's
        unsigned requests, for whatever operator id, reach it. A signed (account, nonce) is
        accepted once: a replay is refused before it counts."""
        window = self.settings.limit_window_s
        if signer is None:
            rules = [Rule("ip", ip, self.settings.ip_limit, window)]
            try:
                return [self.limiter.reserve(rules, network)]
            except LimitExceeded as exc:
                raise _rate_limited(exc) from None
        once = Rule("signed_request", f"{signer.account}:{signer.nonce.hex()}", 1,
                    2 * signed_request.MAX_SKEW_S)
        try:
            first = self.limiter.reserve([once], network)
        except LimitExceeded:
            raise ApiError(409, "replayed_request",
                           f"a signed request of {signer.account} with this nonce was already"
                           " answered; sign a new request with a fresh nonce",
                           field="nonce") from None
        rules = [Rule("account", signer.account, self.settings.account_limit, window),
                 Rule("signed_ip", ip, self.settings.signed_ip_limit, window)]
        try:
            return [first, self.limiter.reserve(rules, network)]
        except LimitExceeded as exc:
            self.limiter.release(first)  # refused, not answered: the same request may come back
            raise _rate_limited(exc) from None

    def get_report(self, report_hash: str) -> dict[str, Any]:
        try:
            key = inputs.report_hash(report_hash)
        except inputs.FieldError as exc:
            raise _field(exc) from None
        report = self.store.get(key)
        if report is None:
            raise ApiError(404, "not_found", f"no report has hash {key}", hash=key)
        current = self.current_genesis_or_none()
        return {
            "report": report,
            "network": {
                "genesis_hash": current,
                "earlier": current is not None and report["genesis_hash"] != current,
            },
        }

    def list_reports(self, operator_id: str | None, account: str | None, limit: int | None,
                     cursor: str | None) -> dict[str, Any]:
        try:
            op = inputs.operator_id(operator_id) if operator_id else None
            acct = inputs.account(account) if account else None
            size = inputs.limit(limit)
            before = inputs.cursor(cursor)
        except inputs.FieldError as exc:
            raise _field(exc) from None
        rows, next_cursor = self.store.page(operator_id=op, account=acct, limit=size,
                                            before=before)
        current = self.current_genesis_or_none()
        return {
            "reports": [r.to_json(current) for r in rows],
            "next_cursor": next_cursor,
            "current_genesis": current,
        }

    def verify(self, body: dict[str, Any]) -> dict[str, Any]:
        report, expected = _verify_input(body)
        verdict = verify_report(report, self.trust, now=self.now(),
                                genesis_hash=self.current_genesis_or_none(), expected=expected)
        self.verified.labels(valid=str(verdict.valid).lower()).inc()
        return verdict.to_json()

    def roots(self) -> dict[str, Any]:
        return {"mock": True, "accept_mock_root": self.settings.accept_mock_root,
                "roots": self.pki.roots_json()}


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


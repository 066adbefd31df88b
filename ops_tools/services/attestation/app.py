"""``net-attestation``: issues mock attestation reports, keeps them, lists and re-verifies them.

    POST /v1/attest             {"operator_id", "account"?, "nonce"?, "signed_at"?, "signature"?}
                                -> 201, the report
    GET  /v1/reports/{hash}     -> {"report", "network": {"genesis_hash", "earlier"}}
    GET  /v1/reports            ?operator_id=&account=&limit=&cursor= -> newest first
    POST /v1/verify             a report, or {"report", "expected"?} -> {"valid", "checks"}
    GET  /v1/roots              the mock root certificate(s) the reports chain up to

The routes are ``routes.router``, their work ``service.Attestation``; this module builds the
service around them.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from ops_tools.attestation import inputs
from ops_tools.errors import InputError
from ops_tools.secrets import read_secret
from ops_tools.services.attestation import routes
from ops_tools.services.attestation import store as reports
from ops_tools.services.attestation.config import AttestationSettings
from ops_tools.services.attestation.pki import MockPki
from ops_tools.services.attestation.service import Attestation
from ops_tools.services.common import logs
from ops_tools.services.common.app import ServiceInfo, create_app
from ops_tools.services.common.db import Database
from ops_tools.services.common.migrations import migrate
from ops_tools.services.common.ratelimit import RateLimiter
from ops_tools.services.common.readiness import ChainWatch, database_check
from ops_tools.services.common.salt import load_salt

MIGRATIONS = Path(__file__).parent / "migrations"
VERSION_TABLE = "attest_alembic_version"


def load_pki(settings: AttestationSettings) -> MockPki:
    seed = read_secret(settings.mock_root_seed_file, key="mock_root_seed_file")
    logs.redact(seed)
    try:
        return MockPki(seed.encode("utf-8"))
    except ValueError as exc:
        raise inputs.FieldError("mock_root_seed_file", str(exc)) from None


def build_app(settings: AttestationSettings, *, clock: Any = None) -> FastAPI:
    now = clock or (lambda: dt.datetime.now(dt.UTC))
    try:
        pki = load_pki(settings)
    except inputs.FieldError as exc:
        raise InputError(str(exc)) from None
    db = Database(settings.effective_database_url())
    migrate(db, MIGRATIONS, version_table=VERSION_TABLE)
    store = reports.ReportStore(db)
    # The salt every instance shares; an instance's own of earlier versions seeds it.
    salt = load_salt(db, reports.shared, settings.salt_file, settings.state_dir / "salt")
    limiter = RateLimiter(db, reports.rate_events, salt)
    watch = ChainWatch(settings.rpc_url, settings.genesis_hash)
    app = create_app(
        ServiceInfo("attestation", description="Mock attestation reports of the NET test network"
                    " (TDX v4 quote plus GPU evidence, chained to a MOCK root)."),
        settings,
        ready_checks=[database_check(db), watch.ready_check()],
    )
    app.state.store = store
    app.state.pki = pki
    app.state.attestation = Attestation(settings, pki=pki, store=store, limiter=limiter,
                                        watch=watch, now=now, registry=app.state.registry)
    app.include_router(routes.router)
    return app

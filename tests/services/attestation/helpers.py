"""Issuing reports for the pure tests: a fixed seed, a fixed clock, fresh nonces."""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

from ops_tools.attestation.gpu import GpuProfile
from ops_tools.attestation.verify import Trust
from ops_tools.services.attestation.pki import MockPki
from ops_tools.services.attestation.report import IssueRequest, issue

SEED = b"test-seed-of-the-mock-root-0123456789"
GENESIS = "0x" + "5a" * 32
NOW = dt.datetime(2026, 11, 23, 4, 0, 0, tzinfo=dt.UTC)
TTL = dt.timedelta(hours=24)


_PKI = MockPki(SEED)


def pki() -> MockPki:
    return _PKI


def make_report(operator_id: str = "alice-op", account: str | None = None,
                nonce: bytes | None = None, gpus: int = 2, at: dt.datetime = NOW) -> dict[str, Any]:
    return issue(pki(), IssueRequest(operator_id, account, nonce or os.urandom(32), GENESIS, at,
                                     TTL, [GpuProfile()] * gpus))


def trust(accept_mock: bool = True) -> Trust:
    return Trust((pki().root,), accept_mock)

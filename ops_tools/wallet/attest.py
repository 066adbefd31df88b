"""Asking the attestation service for a report: ``POST {attestation_url}/v1/attest``.

The wallet sends its own fresh nonce and checks that the report answers that nonce, for this
operator and this account, before it hands the hash on to ``register-operator``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from ops_tools.errors import InputError, OpsError

DEFAULT_ATTESTATION_URL = "http://127.0.0.1:8002"
ENV_ATTESTATION_URL = "NET_ATTESTATION_URL"
_HASH_RE = re.compile(r"^0x[0-9a-f]{64}$")


def resolve_url(flag: str | None) -> str:
    url = flag or os.environ.get(ENV_ATTESTATION_URL) or DEFAULT_ATTESTATION_URL
    if not re.match(r"^https?://[^/\s]+", url):
        source = "--attestation-url" if flag else ENV_ATTESTATION_URL
        raise InputError(f"{source}: {url!r} is not an http:// or https:// URL; give the"
                         " attestation service's address, e.g. http://127.0.0.1:8002")
    return url.rstrip("/")


@dataclass(frozen=True)
class Attestation:
    url: str
    report: dict[str, Any]

    @property
    def hash(self) -> str:
        return str(self.report["hash"])

    def to_json(self) -> dict[str, Any]:
        r = self.report
        return {
            "hash": r["hash"],
            "operator_id": r["operator_id"],
            "account": r["account"],
            "nonce": r["nonce"],
            "issued_at": r["issued_at"],
            "expires_at": r["expires_at"],
            "genesis_hash": r["genesis_hash"],
            "mock": r["mock"],
            "report_url": f"{self.url}/v1/reports/{r['hash']}",
        }


def request_report(url: str, operator_id: str, account: str, timeout: float) -> Attestation:
    nonce = "0x" + secrets.token_hex(32)
    body = json.dumps({"operator_id": operator_id, "account": account, "nonce": nonce}).encode()
    req = urllib.request.Request(  # noqa: S310 - http(s) only, checked by resolve_url
        f"{url}/v1/attest", data=body, method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310
            report = json.load(resp)
    except urllib.error.HTTPError as exc:
        raise OpsError(f"attestation service {url}: HTTP {exc.code}: {_error_message(exc)}",
                       exit_code=1) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise OpsError(f"attestation service {url}: cannot reach it ({reason}); check"
                       f" --attestation-url or ${ENV_ATTESTATION_URL}") from None
    except json.JSONDecodeError:
        raise OpsError(f"attestation service {url}: the answer is not JSON") from None
    _check(url, report, operator_id, account, nonce)
    return Attestation(url, report)


def _error_message(exc: urllib.error.HTTPError) -> str:
    try:
        data = json.loads(exc.read() or b"{}")
        message = data["error"]["message"]
        retry = exc.headers.get("Retry-After")
        return str(message) + (f" (retry after {retry} s)" if retry else "")
    except (ValueError, KeyError, TypeError):
        return exc.reason or "no details"


def _check(url: str, report: Any, operator_id: str, account: str, nonce: str) -> None:
    if not isinstance(report, dict) or not _HASH_RE.fullmatch(str(report.get("hash", ""))):
        raise OpsError(f"attestation service {url}: the answer has no report hash")
    for key, want in (("operator_id", operator_id), ("account", account), ("nonce", nonce)):
        if report.get(key) != want:
            raise OpsError(f"attestation service {url}: the report's {key} is"
                           f" {report.get(key)!r}, not the requested {want!r}; not using it")

"""Asking the attestation service for a report: ``POST {attestation_url}/v1/attest``.

The wallet sends its own fresh nonce and checks that the report answers that nonce, for this
operator and this account, before it hands the hash on to ``register-operator``. Given the
account's key, it signs the request, so that the service counts it against the account's own
limit rather than the client address's (docs/attestation.md, "Signed requests"; the signed
bytes are ``ops_tools.chain.wire.attest_request``, which the service verifies).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from substrateinterface import Keypair

from ops_tools.chain.wire.attest_request import request_message
from ops_tools.errors import InputError, OpsError

DEFAULT_ATTESTATION_URL = "http://127.0.0.1:8002"
ENV_ATTESTATION_URL = "NET_ATTESTATION_URL"
_HASH_RE = re.compile(r"^0x[0-9a-f]{64}$")


def signed_request(keypair: Keypair, genesis_hash: str, operator_id: str, nonce: bytes,
                   signed_at: int | None = None) -> dict[str, Any]:
    """The body of ``POST /v1/attest`` for ``keypair``'s account, signed by it."""
    at = int(time.time()) if signed_at is None else signed_at
    message = request_message(genesis_hash, keypair.public_key, nonce, at, operator_id)
    return {"operator_id": operator_id, "account": keypair.ss58_address,
            "nonce": "0x" + nonce.hex(), "signed_at": at,
            "signature": "0x" + keypair.sign(message).hex()}


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


def request_report(url: str, operator_id: str, account: str, timeout: float, *,
                   signer: Keypair | None = None,
                   genesis_hash: str | None = None) -> Attestation:
    """With ``signer`` (``account``'s key) and the network's ``genesis_hash``, a signed request."""
    raw_nonce = secrets.token_bytes(32)
    nonce = "0x" + raw_nonce.hex()
    if signer is not None and genesis_hash is not None:
        if signer.ss58_address != account:
            raise InputError(f"the signing key is {signer.ss58_address}, not {account}")
        doc = signed_request(signer, genesis_hash, operator_id, raw_nonce)
    else:
        doc = {"operator_id": operator_id, "account": account, "nonce": nonce}
    body = json.dumps(doc).encode()
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

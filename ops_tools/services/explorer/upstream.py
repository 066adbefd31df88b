"""The attestation service's HTTP API, as the explorer uses it."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any


class UpstreamError(Exception):
    """The attestation service did not answer usefully; the message says how."""


class AttestationApi:
    def __init__(self, base_url: str, timeout: float) -> None:
        self.base = base_url.rstrip("/")
        self.timeout = timeout

    def _call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(  # noqa: S310 - the configured http(s) URL only
            self.base + path, data=data, method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310
                return resp.status, json.load(resp)
        except urllib.error.HTTPError as exc:
            try:
                payload = json.loads(exc.read() or b"{}")
            except ValueError:
                payload = {}
            return exc.code, payload
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise UpstreamError(f"the attestation service at {self.base} does not answer"
                                f" ({reason})") from None
        except ValueError:
            raise UpstreamError(f"the attestation service at {self.base} answered something"
                                " that is not JSON") from None

    def _ok(self, status: int, payload: Any, what: str) -> Any:
        if status != 200:
            message = (payload.get("error") or {}).get("message") if isinstance(payload, dict) \
                else None
            raise UpstreamError(f"{what}: the attestation service answered {status}"
                                + (f": {message}" if message else ""))
        return payload

    def report(self, report_hash: str) -> dict[str, Any] | None:
        status, payload = self._call("GET", f"/v1/reports/{urllib.parse.quote(report_hash)}")
        if status == 404:
            return None
        return self._ok(status, payload, "report")

    def reports(self, *, operator_id: str | None = None, account: str | None = None,
                limit: int = 20, cursor: str | None = None) -> dict[str, Any]:
        params = {k: v for k, v in (("operator_id", operator_id), ("account", account),
                                    ("limit", str(limit)), ("cursor", cursor)) if v}
        status, payload = self._call("GET", "/v1/reports?" + urllib.parse.urlencode(params))
        return self._ok(status, payload, "reports")

    def verify(self, report: dict[str, Any]) -> dict[str, Any]:
        status, payload = self._call("POST", "/v1/verify", {"report": report})
        return self._ok(status, payload, "verify")

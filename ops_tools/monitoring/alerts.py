"""What Alertmanager says is firing and what Prometheus saw resolve; ``wait_for_alert`` for a
drill that injects a fault and waits for its alert.

Alertmanager's API lists active alerts only; an alert that resolved is gone from it. Prometheus
keeps the ``ALERTS`` series, so "recently resolved" is what fired within the window and fires
no more, with the last time it was seen firing."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ops_tools.errors import OpsError

# Answers are small; anything bigger is not Alertmanager or Prometheus talking.
MAX_ANSWER_BYTES = 8 * 1024 * 1024
RESOLVED_WINDOW_S = 3600
# Per request. Prometheus and Alertmanager answer in milliseconds on a quiet host, but share the
# processor with a chain and its services on a small one; a human asking can wait this long.
DEFAULT_TIMEOUT_S = 30.0


class NoAnswer(OpsError):
    """Prometheus or Alertmanager did not answer (refused, reset, timed out): a wait may ask
    again, a single question may not."""


@dataclass(frozen=True)
class Alert:
    name: str
    state: str  # firing | resolved (| suppressed: silenced or inhibited in Alertmanager)
    labels: dict[str, str]
    summary: str = ""
    starts_at: str = ""
    # resolved: when Prometheus last saw it firing (unix seconds)
    last_firing: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def matches(self, name: str, labels: Mapping[str, str] | None = None) -> bool:
        return self.name == name and all(
            self.labels.get(k) == v for k, v in (labels or {}).items()
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"alertname": self.name, "state": self.state,
                               "labels": self.labels, "summary": self.summary}
        if self.starts_at:
            out["starts_at"] = self.starts_at
        if self.last_firing is not None:
            out["last_firing"] = self.last_firing
        return out


def _get_json(url: str, timeout: float) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - http(s) only
            body = resp.read(MAX_ANSWER_BYTES + 1)
    except (urllib.error.URLError, OSError) as exc:
        raise NoAnswer(
            f"{url} does not answer in {timeout:g} s ({exc}); is the monitoring deployed and"
            " running?"
        ) from None
    if len(body) > MAX_ANSWER_BYTES:
        raise OpsError(f"{url} answered more than {MAX_ANSWER_BYTES} bytes; refusing to read it")
    try:
        return json.loads(body)
    except ValueError as exc:
        raise OpsError(f"{url} did not answer JSON ({exc})") from None


def _check_url(name: str, url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise OpsError(f"{name} {url!r} is not an http(s) URL; set it in the inventory")
    return url.rstrip("/")


def parse_alertmanager(data: Any) -> list[Alert]:
    """Alertmanager's ``/api/v2/alerts`` answer, as alerts (pure)."""
    if not isinstance(data, list):
        raise OpsError("Alertmanager's /api/v2/alerts did not answer a list")
    out = []
    for item in data:
        if not isinstance(item, dict):
            continue
        labels = {str(k): str(v) for k, v in dict(item.get("labels") or {}).items()}
        state = str((item.get("status") or {}).get("state", "active"))
        out.append(Alert(
            name=labels.get("alertname", ""),
            state="firing" if state == "active" else "suppressed",
            labels=labels,
            summary=str((item.get("annotations") or {}).get("summary", "")),
            starts_at=str(item.get("startsAt", "")),
        ))
    return sorted(out, key=lambda a: (a.name, sorted(a.labels.items())))


def parse_resolved(data: Any, firing: list[Alert]) -> list[Alert]:
    """Prometheus's answer to the resolved query, minus what Alertmanager still has firing."""
    result = ((data or {}).get("data") or {}).get("result") or []
    out = []
    for item in result:
        labels = {k: str(v) for k, v in dict(item.get("metric") or {}).items()
                  if k not in ("__name__", "alertstate")}
        name = labels.get("alertname", "")
        if any(a.matches(name, labels) for a in firing):
            continue
        out.append(Alert(name=name, state="resolved", labels=labels,
                         last_firing=float(item["value"][1])))
    return sorted(out, key=lambda a: (a.name, sorted(a.labels.items())))


def firing_alerts(alertmanager_url: str, timeout: float = DEFAULT_TIMEOUT_S) -> list[Alert]:
    base = _check_url("alertmanager_url", alertmanager_url)
    return parse_alertmanager(_get_json(f"{base}/api/v2/alerts?active=true", timeout))


def resolved_alerts(prometheus_url: str, firing: list[Alert], window_s: int = RESOLVED_WINDOW_S,
                    timeout: float = DEFAULT_TIMEOUT_S) -> list[Alert]:
    base = _check_url("prometheus_url", prometheus_url)
    query = (f'max_over_time(timestamp(ALERTS{{alertstate="firing"}})[{int(window_s)}s:]) '
             f'unless ALERTS{{alertstate="firing"}}')
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    return parse_resolved(_get_json(url, timeout), firing)


def firing(alertmanager_url: str, alertname: str,
           labels: Mapping[str, str] | None = None,
           timeout: float = DEFAULT_TIMEOUT_S) -> list[Alert]:
    """The alerts named ``alertname`` with ``labels`` that Alertmanager has firing now."""
    return [a for a in firing_alerts(alertmanager_url, timeout)
            if a.state == "firing" and a.matches(alertname, labels)]


def wait_for_alert(alertmanager_url: str, alertname: str,
                   labels: Mapping[str, str] | None = None, *, timeout_s: float,
                   resolved: bool = False, poll_s: float = 1.0,
                   request_timeout: float = 5.0,
                   clock: Callable[[], float] = time.monotonic) -> float:
    """Wait until the alert fires (or, with ``resolved``, until it no longer does); the seconds
    it took. Raises OpsError naming the alert after ``timeout_s``.

    A question that gets no answer is asked again until ``timeout_s``: a busy Alertmanager, or one
    restarting, says nothing about the alert, and a drill must not fail on one lost poll."""
    start = clock()
    unanswered: NoAnswer | None = None
    while True:
        try:
            now_firing = bool(firing(alertmanager_url, alertname, labels, request_timeout))
        except NoAnswer as exc:
            unanswered = exc
        else:
            unanswered = None
            if now_firing != resolved:
                return clock() - start
        if clock() - start > timeout_s:
            what = "resolve" if resolved else "fire"
            last = f"; the last question: {unanswered}" if unanswered else ""
            raise OpsError(f"alert {alertname} {dict(labels or {})} did not {what} in"
                           f" {timeout_s:.0f} s at {alertmanager_url}{last}")
        time.sleep(poll_s)


def query(prometheus_url: str, expr: str,
          timeout: float = DEFAULT_TIMEOUT_S) -> list[dict[str, Any]]:
    """The result vector of an instant query."""
    base = _check_url("prometheus_url", prometheus_url)
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    return list(((_get_json(url, timeout) or {}).get("data") or {}).get("result") or [])


def _rule(prometheus_url: str, alertname: str, timeout: float) -> dict[str, Any]:
    base = _check_url("prometheus_url", prometheus_url)
    groups = ((_get_json(f"{base}/api/v1/rules?type=alert", timeout) or {}).get("data")
              or {}).get("groups") or []
    for group in groups:
        for rule in group.get("rules") or []:
            if rule.get("name") == alertname:
                return dict(rule)
    raise OpsError(f"Prometheus at {base} has no alert rule {alertname}; is roles/monitoring"
                   " converged with its rules?")


def rule_expression(prometheus_url: str, alertname: str, timeout: float = DEFAULT_TIMEOUT_S) -> str:
    return str(_rule(prometheus_url, alertname, timeout).get("query") or "")


def rule_for_s(prometheus_url: str, alertname: str, timeout: float = DEFAULT_TIMEOUT_S) -> float:
    """The rule's ``for:`` in seconds, as Prometheus loaded it."""
    return float(_rule(prometheus_url, alertname, timeout).get("duration") or 0)


def scrape_interval_s(prometheus_url: str, timeout: float = DEFAULT_TIMEOUT_S) -> float:
    """The longest scrape interval of the active targets, in seconds."""
    base = _check_url("prometheus_url", prometheus_url)
    targets = ((_get_json(f"{base}/api/v1/targets?state=active", timeout) or {}).get("data")
               or {}).get("activeTargets") or []
    return max((parse_duration_s(str(t.get("scrapeInterval") or "0s")) for t in targets),
               default=0.0)


_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration_s(text: str) -> float:
    """A Prometheus duration (``1m30s``, ``2s``, ``500ms``) in seconds (pure)."""
    import re

    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise OpsError(f"{text!r} is not a Prometheus duration")
    return sum(float(n) * _UNITS[u] for n, u in parts)

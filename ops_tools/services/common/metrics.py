"""Prometheus metrics: one registry per app (several apps in one test process stay apart)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class HttpMetrics:
    def __init__(self, registry: CollectorRegistry, service: str) -> None:
        self.registry = registry
        self.requests = Counter(
            "net_http_requests_total", "HTTP requests by route, method and status",
            ["service", "route", "method", "status"], registry=registry,
        )
        self.latency = Histogram(
            "net_http_request_duration_seconds", "Time to the last byte of the response",
            ["service", "route", "method"], buckets=LATENCY_BUCKETS, registry=registry,
        )
        self.service = service

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(self.service, route, method, str(status)).inc()
        self.latency.labels(self.service, route, method).observe(seconds)

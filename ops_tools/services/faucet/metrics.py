"""The faucet's own Prometheus metrics (the platform adds the HTTP ones)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

INCLUSION_BUCKETS = (0.5, 1, 1.5, 2, 3, 4, 6, 8, 12, 20, 30, 60, 120)


class FaucetMetrics:
    def __init__(self, registry: CollectorRegistry, drip_plancks: int) -> None:
        self.requests = Counter(
            "faucet_requests_total", "Drip requests by outcome", ["outcome"], registry=registry
        )
        self.drips = Counter("faucet_drips_total", "Drips included in a block", registry=registry)
        self.dripped = Counter(
            "faucet_dripped_plancks_total", "Plancks sent by included drips", registry=registry
        )
        self.balance = Gauge(
            "faucet_balance_plancks", "Free balance of the faucet's account", registry=registry
        )
        # Constant: the monitoring's "drips left" is the balance over it (FaucetFewDripsLeft).
        self.drip_size = Gauge(
            "faucet_drip_plancks", "Plancks one drip sends", registry=registry
        )
        self.drip_size.set(drip_plancks)
        self.inclusion = Histogram(
            "faucet_inclusion_seconds", "From submission to the drip's block",
            buckets=INCLUSION_BUCKETS, registry=registry,
        )
        self.in_flight = Gauge(
            "faucet_drips_in_flight", "Drips submitted and not yet in a block", registry=registry
        )

"""Monitoring: Alertmanager and Prometheus clients (what fires, what resolved, waiting for an
alert) and the local network's webhook receiver (docs/monitoring.md)."""

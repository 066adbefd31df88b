"""``ops-tools alerts``: what fires now (Alertmanager) and what resolved recently (Prometheus)."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.table import Table

from ops_tools.cli.output import console, print_json
from ops_tools.deploy.inventory import load_inventory, monitoring_urls
from ops_tools.monitoring.alerts import DEFAULT_TIMEOUT_S, Alert, firing_alerts, resolved_alerts

DEFAULT_INVENTORY = Path("inventories/local")


def alerts(
    inventory: Path = typer.Option(DEFAULT_INVENTORY, "--inventory", "-i",
                                   help="Ansible inventory with a monitoring host."),
    json_out: bool = typer.Option(False, "--json", help="Print the alerts as JSON."),
    timeout: float = typer.Option(DEFAULT_TIMEOUT_S, "--timeout", min=1, max=600,
                                  help="Seconds to wait for each answer."),
) -> None:
    """Firing alerts (Alertmanager) and those resolved within the last hour (Prometheus)."""
    prometheus_url, alertmanager_url = monitoring_urls(load_inventory(inventory))
    firing = firing_alerts(alertmanager_url, timeout)
    resolved = resolved_alerts(prometheus_url, firing, timeout=timeout)
    if json_out:
        print_json({"alertmanager_url": alertmanager_url, "prometheus_url": prometheus_url,
                    "firing": [a.to_json() for a in firing],
                    "resolved": [a.to_json() for a in resolved]})
        return
    print_alerts(firing, resolved)


def print_alerts(firing: list[Alert], resolved: list[Alert] | None = None) -> None:
    table = Table("alert", "state", "host / instance", "summary", "since")
    for a in firing + (resolved or []):
        where = a.labels.get("host") or a.labels.get("instance") or "-"
        if a.state == "resolved" and a.last_firing is not None:
            since = f"last firing {time.strftime('%H:%M:%S', time.gmtime(a.last_firing))} UTC"
            state = "[green]resolved[/green]"
        else:
            since = a.starts_at or "-"
            state = "[red]FIRING[/red]" if a.state == "firing" else a.state
        table.add_row(a.name, state, where, a.summary or "-", since)
    if firing or resolved:
        console.print(table)
    else:
        console.print("no alert firing, none resolved in the last hour", style="green")

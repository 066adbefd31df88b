"""``ops-tools status``: what each host of an inventory runs and serves."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from ops_tools.cli.output import console, print_json, progress
from ops_tools.deploy.status import HostStatus, ServiceStatus, gather


def status(
    inventory: Path = typer.Option(..., "--inventory", "-i", help="Ansible inventory."),
    json_out: bool = typer.Option(False, "--json", help="Print the hosts as JSON."),
) -> None:
    """Per host: role, service state, best and finalized height, peers, genesis match, version;
    per public service: ready or not, and each readiness check."""
    with progress("asking every host", not json_out):
        found = gather(inventory)
    nodes = [h for h in found if isinstance(h, HostStatus)]
    services = [s for s in found if isinstance(s, ServiceStatus)]
    if json_out:
        print_json([h.to_json() for h in found])
    else:
        _print_nodes(nodes)
        if services:
            _print_services(services)
        _print_last_reset(inventory)
        _print_firing(inventory)
    if any(h.genesis_match is not True for h in found):
        raise typer.Exit(1)


def _print_last_reset(inventory: Path) -> None:
    # The reset cycle's own record on this controller (NET_OPS_STATE), as the scheduler left it.
    from ops_tools.reset.outcome import last_run, summary

    run = last_run(inventory)
    if run is not None:
        colour = "green" if run.get("status") == "completed" else "red"
        console.print(summary(run), style=colour, markup=False, highlight=False)


def _print_firing(inventory: Path) -> None:
    # What Alertmanager has firing, when the inventory deploys the monitoring (docs/monitoring.md).
    from ops_tools.cli.alerts import print_alerts
    from ops_tools.deploy.inventory import load_inventory, monitoring_urls
    from ops_tools.errors import OpsError
    from ops_tools.monitoring.alerts import firing_alerts

    inv = load_inventory(inventory)
    if not inv.hosts("monitoring"):
        return
    try:
        # A status is a glance: a monitoring host that does not answer soon is reported.
        firing = firing_alerts(monitoring_urls(inv)[1], timeout=10)
    except OpsError as exc:
        console.print(f"alerts: {exc}", style="red", markup=False, highlight=False)
        return
    print_alerts(firing)


def _print_services(services: list[ServiceStatus]) -> None:
    table = Table("host", "service", "ready", "checks", "URL")
    for s in services:
        ready = "[green]ready[/green]" if s.ready else "[red]NOT READY[/red]"
        checks = "; ".join(
            f"{c.get('name')}: {'ok' if c.get('ok') else 'FAIL'} {c.get('detail', '')}".strip()
            for c in s.checks
        ) or (s.error or "-")
        table.add_row(s.host, s.service, ready, checks, s.url)
    console.print(table)


def _print_nodes(hosts: list[HostStatus]) -> None:
    table = Table("host", "role", "service", "best", "finalized", "peers", "genesis", "version")
    for h in hosts:
        if h.genesis is None:
            genesis = f"[red]unreachable[/red] {h.error or ''}"
        elif h.genesis_match:
            genesis = f"[green]match[/green] {h.genesis[:12]}…"
        else:
            genesis = (
                f"[red]MISMATCH[/red] serves {h.genesis[:12]}…,"
                f" deployed {str(h.deployed_genesis)[:12]}…"
            )
        table.add_row(
            h.host,
            h.role,
            h.service,
            _n(h.best),
            _n(h.finalized),
            _n(h.peers),
            genesis,
            h.version or "-",
        )
    console.print(table)


def _n(value: int | None) -> str:
    return "-" if value is None else str(value)

"""``ops-tools reset-cycle``: rebuild the network when the pallet-suite revision changes it."""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

import typer

from ops_tools.cli.output import console, err_console, print_json

# The cycle's modules are imported when the command runs, not when the CLI is assembled.


def _ask(text: str) -> bool:
    from ops_tools.reset.cycle import CycleFailed

    console.print(text, markup=False)
    if not sys.stdin.isatty():
        raise CycleFailed(
            "the cycle would change hosts and there is no terminal to confirm on; pass --yes"
        )
    return typer.confirm("Proceed?", default=False)


def reset_cycle(
    inventory: Path = typer.Option(
        ..., "--inventory", "-i", help="Ansible inventory of the network."
    ),
    repo: str = typer.Option(..., "--repo", help="Pallet-suite repository (URL or path)."),
    ref: str = typer.Option(..., "--ref", help="Branch, tag or commit of the pallet-suite."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the plan and its reason; touch no host."
    ),
    yes: bool = typer.Option(
        False, "--yes", "-y", help="Do not ask before the destructive phases."
    ),
    resume: bool = typer.Option(
        False, "--resume", help="Continue the interrupted cycle of this inventory."
    ),
    timeout: float = typer.Option(
        120.0, "--timeout", help="Seconds to wait for nodes at each wait."
    ),
    cache: Path | None = typer.Option(None, "--cache", help="Build cache directory."),
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Build REF, render, compare genesis hashes with the live network, reset when they differ."""
    from ops_tools.reset.cycle import Options, ResetCycle

    opts = Options(
        inventory=inventory,
        repo=repo,
        ref=ref,
        dry_run=dry_run,
        yes=yes,
        resume=resume,
        timeout_s=timeout,
        build_cache=cache,
        confirm=_ask,
    )
    cycle = ResetCycle(opts)
    if json_out:
        report = cycle.run()
    else:
        with console.status("reset cycle", spinner="dots") as status:
            opts.on_step = lambda phase: status.update(f"phase: {phase}")
            report = cycle.run()
    if json_out:
        print_json(asdict(report))
        return
    console.print(f"decision: {report.decision} — {report.reason}", markup=False)
    if report.dry_run:
        plan = ", ".join(report.plan) or "nothing"
        console.print(f"dry run: would run {plan}; no host was touched", markup=False)
        return
    from rich.table import Table

    table = Table("phase", "status", "seconds", "detail")
    for p in report.phases:
        table.add_row(p["name"], p["status"], f"{p['seconds']:.1f}", p["detail"])
    if report.phases:
        console.print(table)
    if report.downtime_s is not None:
        console.print(
            f"downtime: {report.downtime_s:.1f} s (first stop -> public endpoint on the"
            f" new genesis with finality advancing); total {report.total_s:.1f} s"
        )
    if report.journal:
        err_console.print(f"journal: {report.journal}", markup=False)

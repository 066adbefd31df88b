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
    resume_interrupted: bool = typer.Option(
        False, "--resume-interrupted",
        help="If this inventory's last cycle did not finish, resume it first, then run this one.",
    ),
    force_reset: bool = typer.Option(
        False, "--force-reset",
        help="Wipe the chain even though its genesis did not change (asks first; --yes to run"
        " unattended).",
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
        resume_interrupted=resume_interrupted,
        force_reset=force_reset,
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
    if report.resumed:
        console.print(f"resumed the interrupted cycle {report.resumed['cycle_id']} first"
                      f" ({report.resumed['decision']}): done", markup=False)
    console.print(f"decision: {report.decision} — {report.reason}", markup=False)
    _print_evidence(report.evidence)
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


def _print_evidence(evidence: dict) -> None:
    """What the decision was taken on: the public endpoint's probes, each node's genesis."""
    if not evidence.get("nodes"):
        return
    console.print(f"public endpoint {evidence.get('public_endpoint')}: "
                  + "; ".join(evidence.get("public_probes") or ["not probed"]), markup=False)
    for host, seen in evidence["nodes"].items():
        serves = seen["serves"] or "nothing (no answer)"
        console.print(f"  {host} ({seen['role']}): serves {serves}, deployed {seen['deployed']}",
                      markup=False)

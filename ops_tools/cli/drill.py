"""``ops-tools drill``: a chaos drill on a healthy network (docs/drills.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.status import Status
from rich.table import Table

from ops_tools.cli.output import console, err_console, print_json

# The drills' modules are imported when the command runs, not when the CLI is assembled.
DEFAULT_INVENTORY = Path("inventories/local")
LONG_STEPS = {"healthy": "checking that the network is healthy",
              "detect": "waiting for the alert to fire in Alertmanager",
              "recover": "waiting for the network to recover and the alert to resolve"}


class _Display:
    """The steps as lines, a spinner while a long step waits (on stderr under --json)."""

    def __init__(self, out: Console) -> None:
        self.out = out
        self.status: Status | None = None

    def _stop(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None

    def skipped(self, step: str, detail: str) -> None:
        self.out.print(f"  {step}: kept ({detail})", markup=False)

    def redoing(self, step: str, reason: str) -> None:
        self.out.print(f"  {step}: again ({reason})", markup=False)

    def started(self, step: str) -> None:
        self._stop()
        if step in LONG_STEPS:
            self.status = self.out.status(f"{step}: {LONG_STEPS[step]}", spinner="dots")
            self.status.start()

    def finished(self, step: str, detail: str) -> None:
        self._stop()
        self.out.print(f"[green]✓[/green] {step}: {detail}", highlight=False)

    def failed(self, step: str, error: str) -> None:
        self._stop()
        self.out.print(f"[red]✗[/red] {step}: {error}", highlight=False)


def _print_report(report: Any, title: str) -> None:
    data = report.to_json()
    table = Table(title=title, show_header=False)
    for key, label in (("status", "status"), ("detect_s", "time to detect (s)"),
                       ("detect_bound_s", "bound: 2 x for: + scrape (s)"),
                       ("fault_s", "fault lasted (s)"), ("resolve_s", "alert resolved after (s)"),
                       ("recover_s", "time to recover (s)")):
        table.add_row(label, "-" if data[key] is None else str(data[key]))
    blocks = data.get("blocks") or {}
    for key in ("slots", "produced", "lost", "orphaned", "unfinalized_at_removal"):
        if key in blocks:
            table.add_row(f"blocks {key.replace('_', ' ')}", str(blocks[key]))
    if data.get("error"):
        table.add_row("error", data["error"])
    console.print(table)


KEY_LOSS = "key-loss"


def _key_loss(inventory: Path, host: str | None, backup_dir: Path | None,
              passphrase_file: Path | None, json_out: bool) -> None:
    """Delete an authority's keys, restore them from a fresh backup, see finality resume with
    the same peer id and session keys (ops_tools/backup/keyloss.py; it puts the keys back itself
    when anything fails after the deletion, so it keeps no drill journal)."""
    from ops_tools.backup.keyloss import key_loss
    from ops_tools.errors import InputError

    if backup_dir is None or passphrase_file is None:
        raise InputError("key-loss takes a backup first: give --backup-dir (a new directory) and"
                         " --passphrase-file (the backup's passphrase)")
    out = err_console if json_out else console
    report = key_loss(inventory, backup_dir, passphrase_file, host or "authority-0",
                      on_step=lambda line: out.print(f"  {line}", markup=False))
    if json_out:
        print_json({"previous": None, "report": report.to_json()})
        return
    table = Table(title=f"drill key-loss ({report.host})", show_header=False)
    for key, value in report.to_json().items():
        table.add_row(key.replace("_", " "), str(value))
    console.print(table)


def drill(
    scenario: str | None = typer.Argument(
        None, help="authority-down | rpc-down | service-down NAME | partition | faucet-drain"
                   " | key-loss"),
    arg: str | None = typer.Argument(
        None, help="The scenario's host or service (service-down: faucet, gateway, ...)."),
    inventory: Path = typer.Option(DEFAULT_INVENTORY, "--inventory", "-i",
                                   help="Ansible inventory of the network: the local one, or"
                                        " machines reached over SSH (docs/drills.md)."),
    resume: bool = typer.Option(False, "--resume",
                                help="Restore the fault of a drill that did not finish, check"
                                     " the recovery and report it."),
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    backup_dir: Path | None = typer.Option(
        None, "--backup-dir", help="key-loss: a new directory for the drill's backup."),
    passphrase_file: Path | None = typer.Option(
        None, "--passphrase-file", help="key-loss: the backup's passphrase, in a file."),
) -> None:
    """Inject a fault into a healthy network, see its alert fire, remove it, see it recover."""
    if scenario == KEY_LOSS:
        _key_loss(inventory, arg, backup_dir, passphrase_file, json_out)
        return
    from ops_tools.deploy.inventory import load_inventory
    from ops_tools.drills.remote import open_network
    from ops_tools.drills.runner import run
    from ops_tools.drills.scenarios import SCENARIOS, build
    from ops_tools.errors import InputError

    if resume and scenario is not None:
        raise typer.BadParameter("--resume finishes the last drill; name no scenario with it")
    if scenario is not None and scenario not in SCENARIOS:
        raise InputError(f"scenario {scenario!r} is unknown; choose one of"
                         f" {', '.join(SCENARIOS)}")
    net = open_network(load_inventory(inventory))
    try:
        if scenario is not None:
            build(scenario, arg, net.topology())  # a bad name fails before anything else
        out = err_console if json_out else console
        display = _Display(out)

        def on_previous(journal: Any) -> None:
            out.print(f"restoring the fault of drill {journal.drill_id} ({journal.scenario}),"
                      " which did not finish", markup=False)

        previous, report = run(net, scenario, arg, resume=resume, display=display,
                               on_previous=on_previous)
    finally:
        net.close()
    if json_out:
        print_json({"previous": previous.to_json() if previous else None,
                    "report": report.to_json() if report else None})
        return
    if previous is not None:
        _print_report(previous, f"drill {previous.scenario['name']} (finished now)")
    if report is not None:
        _print_report(report, f"drill {report.scenario['name']}")

"""``ops-tools backup`` and ``ops-tools restore`` (docs/backup.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from ops_tools.backup.restore import Plan
from ops_tools.backup.restore import restore as do_restore
from ops_tools.backup.take import backup as do_backup
from ops_tools.cli.output import console, err_console, print_json
from ops_tools.errors import InputError

DEFAULT_INVENTORY = Path("inventories/local")


def backup(
    inventory: Path = typer.Option(DEFAULT_INVENTORY, "--inventory", "-i",
                                   help="Ansible inventory of the network to back up."),
    out: Path = typer.Option(..., "--out", help="New directory to write the backup into."),
    passphrase_file: Path = typer.Option(..., "--passphrase-file",
                                         help="File (mode 0600) holding the passphrase."),
    host: list[str] = typer.Option([], "--host",
                                   help="Only these hosts' keys and databases (repeatable)."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Save node keys, the authorities' keystores, the services' databases and the release,
    encrypted with the passphrase."""
    def step(text: str) -> None:
        if not json_out:
            err_console.print(text, markup=False)

    result = do_backup(inventory, out, passphrase_file, host or None, on_step=step)
    if json_out:
        print_json(result.to_json())
        return
    for m in result.members:
        console.print(f"{m['kind']:<9} {m['host'] or '-':<14} {m['size']:>10}  {m['name']}",
                      markup=False, highlight=False)
    console.print(f"backup of genesis {result.network['genesis_hash']} written to {result.path}"
                  f" in {result.seconds:.1f} s", markup=False)


def restore(
    inventory: Path = typer.Option(DEFAULT_INVENTORY, "--inventory", "-i",
                                   help="Ansible inventory of the network to restore into."),
    source: Path = typer.Option(..., "--from", help="Directory ops-tools backup wrote."),
    passphrase_file: Path = typer.Option(..., "--passphrase-file",
                                         help="File (mode 0600) holding the passphrase."),
    host: list[str] = typer.Option([], "--host", help="Only these hosts (repeatable)."),
    kind: list[str] = typer.Option([], "--kind", help="Only these kinds: node_key, keystore,"
                                   " database, release (repeatable)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask before writing."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Verify a backup (sums, passphrase, network), say what it replaces, then put it back."""
    def confirm(p: Plan) -> bool:
        for line in p.describe():
            err_console.print(line, markup=False)
        if yes:
            return True
        if json_out or not sys.stdin.isatty():
            raise InputError("restore replaces files and there is no terminal to confirm on;"
                             " pass --yes")
        return typer.confirm("Proceed?", default=False)

    def step(text: str) -> None:
        if not json_out:
            err_console.print(text, markup=False)

    result = do_restore(inventory, source, passphrase_file, host or None, kind or None,
                        confirm=confirm, on_step=step)
    if json_out:
        print_json(result.to_json())
        return
    console.print(f"restored {sum(w.writes for w in result.plan.writes)} file(s) from"
                  f" {result.plan.source} in {result.seconds:.1f} s", markup=False)

"""``ops-tools chainspec``: genesis hash and inspection of chain specs."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from ops_tools.chainspec import compute_genesis, load_spec
from ops_tools.chainspec.inspect import summarize
from ops_tools.cli.output import console, print_json

app = typer.Typer(help="Chain specs: genesis hash, inspection, rendering.", no_args_is_help=True)

SpecArg = typer.Argument(
    ..., help="Path of a chain spec JSON file (raw, or light).", metavar="SPEC"
)


@app.command("genesis-hash")
def genesis_hash(
    spec: Path = SpecArg,
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    state_version: int | None = typer.Option(
        None, "--state-version", min=0, max=1, help="Override the runtime's state version (0 or 1)."
    ),
) -> None:
    """Compute the genesis hash a node derives from SPEC, offline."""
    info = compute_genesis(load_spec(spec), state_version=state_version)
    if json_out:
        print_json(info.to_json())
    else:
        typer.echo("0x" + info.genesis_hash.hex())


@app.command("inspect")
def inspect(
    spec: Path = SpecArg,
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Summarise SPEC: identity, properties, boot nodes, runtime version and APIs, storage."""
    summary = summarize(load_spec(spec))
    if json_out:
        print_json(summary)
        return
    table = Table(show_header=False, box=None)
    for key in (
        "name",
        "id",
        "protocolId",
        "chainType",
        "spec_kind",
        "genesis_hash",
        "state_version",
        "storage_keys",
        "code_size",
        "code_blake2_256",
    ):
        table.add_row(key, str(summary.get(key)))
    table.add_row(
        "properties", ", ".join(f"{k}={v}" for k, v in (summary["properties"] or {}).items())
    )
    boot = summary["bootNodes"] or []
    table.add_row("bootNodes", "\n".join(boot) if boot else "(none)")
    rt = summary.get("runtime")
    if rt:
        table.add_row(
            "runtime",
            f"{rt['spec_name']}/{rt['impl_name']} spec {rt['spec_version']}"
            f" impl {rt['impl_version']} tx {rt['transaction_version']}",
        )
        table.add_row(
            "apis", "\n".join(f"{a['name'] or a['id']} v{a['version']}" for a in rt["apis"])
        )
    else:
        table.add_row("runtime", "(no embedded version)")
    console.print(table)

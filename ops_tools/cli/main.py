"""Entry point of ``ops-tools``: assembles the sub-commands and maps errors to exit codes.

Each sub-command's module is imported only when that command runs (all of them for the root
help or an unknown command): together they import pyinfra, the renderer, Rich's tables and
more, about half a second that a command like ``reset-cycle --dry-run`` should not pay for the
others.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import typer

from ops_tools import __version__
from ops_tools.cli.output import err_console
from ops_tools.errors import OpsError


def _add_chainspec(app: typer.Typer) -> None:
    from ops_tools.cli import chainspec

    app.add_typer(chainspec.app, name="chainspec")


def _add_node(app: typer.Typer) -> None:
    from ops_tools.cli import node

    app.add_typer(node.app, name="node")


def _add_localnet(app: typer.Typer) -> None:
    from ops_tools.cli import localnet

    app.add_typer(localnet.app, name="localnet")


def _add_reset_cycle(app: typer.Typer) -> None:
    from ops_tools.cli import reset

    app.command("reset-cycle")(reset.reset_cycle)


def _add_docs(app: typer.Typer) -> None:
    from ops_tools.cli import docs

    app.add_typer(docs.app, name="docs")


def _add_status(app: typer.Typer) -> None:
    from ops_tools.cli import status

    app.command("status")(status.status)


def _add_alerts(app: typer.Typer) -> None:
    from ops_tools.cli import alerts

    app.command("alerts")(alerts.alerts)


def _add_drill(app: typer.Typer) -> None:
    from ops_tools.cli import drill

    app.command("drill")(drill.drill)


def _add_backup(app: typer.Typer) -> None:
    from ops_tools.cli import backup

    app.command("backup")(backup.backup)


def _add_restore(app: typer.Typer) -> None:
    from ops_tools.cli import backup

    app.command("restore")(backup.restore)


def _add_gateway(app: typer.Typer) -> None:
    from ops_tools.cli import gateway

    app.add_typer(gateway.app, name="gateway")


def _add_operator(app: typer.Typer) -> None:
    from ops_tools.cli import operator

    app.add_typer(operator.app, name="operator")


def _add_containers(app: typer.Typer) -> None:
    from ops_tools.cli import containers

    app.add_typer(containers.app, name="containers")


# In the order the help lists them.
COMMANDS: dict[str, Callable[[typer.Typer], None]] = {
    "chainspec": _add_chainspec,
    "node": _add_node,
    "localnet": _add_localnet,
    "reset-cycle": _add_reset_cycle,
    "status": _add_status,
    "alerts": _add_alerts,
    "drill": _add_drill,
    "backup": _add_backup,
    "restore": _add_restore,
    "gateway": _add_gateway,
    "operator": _add_operator,
    "containers": _add_containers,
    "docs": _add_docs,
}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"ops-tools {__version__}")
        raise typer.Exit()


def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Build, render, deploy, check and reset the NET test network."""


def _command_in(argv: list[str]) -> str | None:
    """The sub-command ``argv`` names (the root's own options take no values), if known."""
    name = next((arg for arg in argv if not arg.startswith("-")), None)
    return name if name in COMMANDS else None


def make_app(argv: list[str] | None = None) -> typer.Typer:
    """The CLI with the sub-command ``argv`` names, or with all of them."""
    app = typer.Typer(
        name="ops-tools",
        help="Build, render, deploy, check and reset the NET test network.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
    )
    app.callback()(_root)
    wanted = _command_in(sys.argv[1:] if argv is None else argv)
    for name, add in COMMANDS.items():
        if wanted is None or name == wanted:
            add(app)
    return app


def __getattr__(name: str) -> Any:
    if name == "app":  # the complete CLI, for whoever imports it
        return make_app([])
    raise AttributeError(name)


def main(argv: list[str] | None = None) -> None:
    try:
        make_app(argv)(args=argv, prog_name="ops-tools", standalone_mode=True)
    except OpsError as exc:
        err_console.print(f"error: {exc}", markup=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("interrupted", markup=False)
        sys.exit(130)


if __name__ == "__main__":
    main()

"""Entry point of ``ops-tools``: assembles the sub-commands and maps errors to exit codes."""

from __future__ import annotations

import sys

import typer

from ops_tools import __version__
from ops_tools.cli import chainspec, localnet, node, reset, status
from ops_tools.cli.output import err_console
from ops_tools.errors import OpsError

app = typer.Typer(
    name="ops-tools",
    help="Build, render, deploy, check and reset the NET test network.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(chainspec.app, name="chainspec")
app.add_typer(node.app, name="node")
app.add_typer(localnet.app, name="localnet")
app.command("reset-cycle")(reset.reset_cycle)
app.command("status")(status.status)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"ops-tools {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Build, render, deploy, check and reset the NET test network."""


def main(argv: list[str] | None = None) -> None:
    try:
        app(args=argv, prog_name="ops-tools", standalone_mode=True)
    except OpsError as exc:
        err_console.print(f"error: {exc}", markup=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("interrupted", markup=False)
        sys.exit(130)


if __name__ == "__main__":
    main()

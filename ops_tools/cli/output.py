"""Shared output conventions: machine JSON on stdout, human text via Rich, errors on stderr."""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any

from rich.console import Console
from rich.status import Status

# Off a terminal (CI logs, pipes) Rich would assume 80 columns and fold the tables.
console = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True) + "\n")


def fail(message: str, code: int = 1) -> None:
    err_console.print(f"error: {message}", markup=False)
    raise SystemExit(code)


def progress(text: str, enabled: bool = True) -> Status | contextlib.nullcontext[None]:
    """A Rich spinner while a long step runs; nothing when the output is ``--json``."""
    return console.status(text, spinner="dots") if enabled else contextlib.nullcontext()

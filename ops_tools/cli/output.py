"""Shared output conventions: machine JSON on stdout, human text via Rich, errors on stderr."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

console = Console(soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True) + "\n")


def fail(message: str, code: int = 1) -> None:
    err_console.print(f"error: {message}", markup=False)
    raise SystemExit(code)

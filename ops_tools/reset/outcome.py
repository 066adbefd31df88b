"""The last reset cycle's outcome per inventory (``last-run.json`` beside its journal), where
``ops-tools status``, the scheduler's operators and the monitoring read it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ops_tools import atomic
from ops_tools.reset.context import cycle_dir

FILE = "last-run.json"


def record(directory: Path, outcome: dict[str, Any]) -> None:
    atomic.write_text(directory / FILE, json.dumps(outcome, indent=2, sort_keys=True) + "\n",
                      mode=0o600)


def last_run(inventory: Path) -> dict[str, Any] | None:
    """The inventory's last recorded cycle; None when no cycle ran (or the file is unreadable:
    it is rewritten whole by the next run)."""
    try:
        data = json.loads((cycle_dir(inventory) / FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def summary(run: dict[str, Any]) -> str:
    """One line: when, how it ended, what it decided and why it failed."""
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(run.get("finished") or 0)))
    line = f"last reset cycle {run.get('cycle_id')} ({when}): {run.get('status')}"
    if run.get("decision"):
        line += f", decision {run['decision']}"
    if run.get("down"):
        line += f" (down: {', '.join(run['down'])})"
    if run.get("error"):
        line += f"; error: {run['error']}"
    return line

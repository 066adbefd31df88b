"""Host manifests: what the node role records on each host about what it deployed there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MANIFEST_NAME = "deployed.json"


def read_local_manifest(state_dir: Path, host: str) -> dict[str, Any] | None:
    """The manifest of a host of the local inventory (its files are on this machine)."""
    path = state_dir / host / MANIFEST_NAME
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None

"""Host manifests: what the node role records on each host about what it deployed there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MANIFEST_NAME = "deployed.json"
# What the service role records after a service's successful start (roles/service).
SERVICE_MANIFEST_NAME = "service.json"


def read_local_manifest(
    state_dir: Path, host: str, name: str = MANIFEST_NAME
) -> dict[str, Any] | None:
    """The manifest of a host of the local inventory (its files are on this machine)."""
    path = state_dir / host / name
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None

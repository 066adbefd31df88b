"""Where the project's playbooks, inventories and state live."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PLAYBOOKS = PROJECT_ROOT / "playbooks"
INVENTORIES = PROJECT_ROOT / "inventories"
ANSIBLE_CFG = PROJECT_ROOT / "ansible.cfg"
NETWORKS = PROJECT_ROOT / "chainspec" / "networks"


def localnet_dir() -> Path:
    """State of the local network: ``$NET_LOCALNET_DIR`` or ``.state/localnet`` in the project."""
    env = os.environ.get("NET_LOCALNET_DIR")
    return Path(env).resolve() if env else PROJECT_ROOT / ".state" / "localnet"


def supervisor_conf(state: Path) -> Path:
    """The local network's supervisord configuration under its state directory."""
    return state / "supervisor" / "supervisord.conf"

"""Helpers of the reset_scheduler role tests: a temporary controller root, the role applied to
it with ansible-playbook over a local connection, and test doubles for what cannot run here
(ops-tools' real cycle needs a network; systemctl needs systemd as PID 1)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ops_tools.deploy.runner import strategy_env
from tests.conftest import ROOT

HERE = Path(__file__).resolve().parent
VENV_BIN = Path(sys.executable).parent
FAKES = HERE / "fakes"
UNIT = "net-reset-cycle"


@dataclass
class Run:
    rc: int
    out: str

    def recap(self, key: str) -> int:
        m = re.search(rf"\b{key}=(\d+)", self.out.split("PLAY RECAP")[-1])
        assert m, self.out
        return int(m.group(1))


@dataclass
class Controller:
    """A controller host under a temporary root: ops-tools, an inventory, the role's paths."""

    root: Path

    @property
    def unit_dir(self) -> Path:
        return self.root / "etc/systemd/system"

    @property
    def wrapper(self) -> Path:
        return self.root / "usr/local/bin" / UNIT

    @property
    def systemctl_state(self) -> Path:
        return self.root / "systemctl.json"

    def systemctl_calls(self) -> list[str]:
        path = Path(f"{self.systemctl_state}.calls")
        return path.read_text().splitlines() if path.exists() else []

    def role_vars(self, **overrides: Any) -> dict[str, Any]:
        user = os.environ.get("USER") or "root"
        v: dict[str, Any] = {
            "ansible_connection": "local",
            "ansible_python_interpreter": sys.executable,
            "reset_scheduler_inventory": str(self.root / "inventory/hosts.yml"),
            "reset_scheduler_repo": "https://git.example.org/net/pallet-suite.git",
            "reset_scheduler_ops_tools": str(self.root / "opt/ops-tools"),
            "reset_scheduler_user": user,
            "reset_scheduler_group": user,
            "reset_scheduler_bin_dir": str(self.root / "usr/local/bin"),
            "reset_scheduler_log_dir": str(self.root / "var/log/net"),
            "reset_scheduler_state_dir": str(self.root / "var/lib/net/reset-scheduler"),
            "reset_scheduler_cron_dir": str(self.root / "etc/cron.d"),
            "reset_scheduler_systemd_unit_dir": str(self.unit_dir),
            "reset_scheduler_logrotate_dir": str(self.root / "etc/logrotate.d"),
            "reset_scheduler_manage_packages": False,
        }
        v.update(overrides)
        return {k: val for k, val in v.items() if val is not None}

    def apply(self, *args: str, **overrides: Any) -> Run:
        """ansible-playbook tests/reset_scheduler/play.yml with the role's variables; None
        leaves a variable out."""
        inventory = self.root.parent / "inventory.json"
        inventory.write_text(
            json.dumps({"all": {"hosts": {"controller": self.role_vars(**overrides)}}})
        )
        env = {
            **os.environ,
            "PATH": f"{FAKES}:{VENV_BIN}:{os.environ.get('PATH', '')}",
            "ANSIBLE_ROLES_PATH": str(ROOT / "roles"),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_RETRY_FILES_ENABLED": "0",
            "ANSIBLE_LOCAL_TEMP": str(self.root.parent / "ansible-tmp"),
            "FAKE_SYSTEMD_UNIT_DIR": str(self.unit_dir),
            "FAKE_SYSTEMCTL_STATE": str(self.systemctl_state),
            # The strategy the maintainers' playbooks run with (ops-tools' default): mitogen
            # halves the processor time of each apply.
            **strategy_env(None),
        }
        p = subprocess.run(
            [
                str(VENV_BIN / "ansible-playbook"),
                "-i",
                str(inventory),
                str(HERE / "play.yml"),
                *args,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        return Run(p.returncode, p.stdout + p.stderr)


@pytest.fixture
def controller(tmp_path: Path) -> Controller:
    root = tmp_path / "root"
    (root / "inventory").mkdir(parents=True)
    (root / "inventory/hosts.yml").write_text("all: {}\n")
    (root / "opt").mkdir()
    (root / "etc/systemd/system").mkdir(parents=True)  # as on any host with systemd
    ops_tools = root / "opt/ops-tools"
    ops_tools.write_text("#!/bin/sh\nexit 0\n")
    ops_tools.chmod(0o755)
    return Controller(root)


def files_under(root: Path, keep: Callable[[Path], bool] = lambda p: True) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and keep(p)}

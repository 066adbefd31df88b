"""The role's molecule scenario (roles/reset_scheduler/molecule/default) against this machine:
converge, idempotence, verify (cron entry, wrapper behaviour, flock, pause, logrotate), destroy."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from ops_tools.deploy.runner import strategy_env
from tests.ansible.conftest import MOLECULE
from tests.conftest import ROOT
from tests.reset_scheduler.conftest import VENV_BIN

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

ROLE = ROOT / "roles" / "reset_scheduler"


@pytest.mark.slow
def test_molecule_scenario(tmp_path: Path) -> None:
    root = tmp_path / "root"
    env = {
        **os.environ,
        "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}",
        "RESET_SCHEDULER_TEST_ROOT": str(root),
        "MOLECULE_NO_COLOR": "1",
        "NO_COLOR": "1",
        "ANSIBLE_NOCOLOR": "1",
        **strategy_env(None),  # as the other roles' scenarios (tests/ansible/conftest.py)
    }
    p = subprocess.run(
        [*MOLECULE, "test", "--scenario-name", "default"],
        cwd=ROLE,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-6000:]
    for action in ("converge", "idempotence", "verify"):
        assert re.search(rf"default > {action}: Executed: Successful", out), out[-6000:]
    assert not root.exists(), "destroy left the test root behind"

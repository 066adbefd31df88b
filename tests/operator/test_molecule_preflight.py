"""The genesis_preflight role's molecule scenario (default driver, against this machine):
converge, idempotence (a second converge changes nothing) and verify; its cleanup stops the
development node it started as the public node."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.ansible.conftest import MOLECULE
from tests.conftest import ROOT, free_port
from tests.operator.conftest import VENV_BIN

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)


@pytest.mark.slow
def test_genesis_preflight_molecule_scenario(tmp_path: Path) -> None:
    ephemeral = tmp_path / "molecule"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "NET_"))}
    env.update(MOLECULE_EPHEMERAL_DIRECTORY=str(ephemeral),
               GENESIS_PREFLIGHT_MOLECULE_PORT=str(free_port()), ANSIBLE_NOCOLOR="1", NO_COLOR="1",
               PATH=f"{VENV_BIN}:{os.environ['PATH']}")
    pidfile = ephemeral / "public-node.pid"
    try:
        proc = subprocess.run([*MOLECULE, "test"],
                              cwd=ROOT / "roles" / "genesis_preflight", env=env,
                              capture_output=True, text=True, timeout=600)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out[-6000:]
        for step in ("converge", "idempotence", "verify"):
            assert f"{step}: Executed: Successful" in out or f"{step}] Executed: Successful" in out
        assert not pidfile.exists(), "cleanup did not run"
        alive = subprocess.run(["pgrep", "-f", "--", f"--base-path {ephemeral}/public-node"],
                               capture_output=True, check=False)
        assert alive.returncode == 1, "cleanup left the public node running"
    finally:
        # Whatever happened, nothing of this scenario may outlive the test.
        subprocess.run(["pkill", "-KILL", "-f", "--", f"--base-path {ephemeral}/public-node"],
                       check=False)

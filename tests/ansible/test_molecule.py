"""Each role's molecule scenario (default driver, against this machine): converge, idempotence
(a second converge changes nothing) and verify, with state in a temporary directory. Every
scenario's cleanup shuts its own supervisord down; this wrapper makes sure of it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.ansible.conftest import ROOT, VENV_BIN, ansible_env, run, tail


def _processes_under(path: Path) -> list[str]:
    out = subprocess.run(["pgrep", "-a", "-f", str(path)], capture_output=True, text=True)
    return [ln for ln in out.stdout.splitlines() if "pgrep" not in ln]


# Every role's default scenario on this machine; these two have suites of their own
# (tests/operator, tests/reset_scheduler) that run them with their fixtures.
OWN_SUITES = {"genesis_preflight", "reset_scheduler"}
ROLES = sorted(p.parents[2].name for p in ROOT.glob("roles/*/molecule/default/molecule.yml")
               if p.parents[2].name not in OWN_SUITES)


@pytest.mark.slow
@pytest.mark.parametrize("role", ROLES)
def test_molecule_scenario(role: str, tmp_path: Path) -> None:
    ephemeral = tmp_path / "molecule"
    env = ansible_env(MOLECULE_EPHEMERAL_DIRECTORY=str(ephemeral))
    conf = ephemeral / "state" / "supervisor" / "supervisord.conf"
    try:
        proc = run([str(VENV_BIN / "molecule"), "test", "-s", "default"], cwd=ROOT / "roles" / role,
                   env=env,
                   timeout=900)
        assert proc.returncode == 0, tail(proc, 120)
        out = proc.stdout + proc.stderr
        steps = ["converge", "idempotence", "verify"]
        scenario = (ROOT / "roles" / role / "molecule" / "default" / "molecule.yml").read_text()
        if "- check" in scenario:
            steps.append("check")
        for step in steps:
            ran = f"{step}] Executed: Successful" in out or f"{step}: Executed: Successful" in out
            assert ran, f"molecule did not run {step}:\n{tail(proc, 40)}"
        assert _processes_under(ephemeral) == [], "the scenario left processes behind"
    finally:
        if conf.exists():
            subprocess.run(["supervisorctl", "-c", str(conf), "shutdown"], capture_output=True,
                           timeout=120, check=False)

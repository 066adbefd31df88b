"""Each role's systemd scenario (roles/<role>/molecule/systemd): the production variant on a real
systemd test host (tests/hosts) over SSH with become, as the testnet inventory sets it. Converge,
idempotence (a second converge changes nothing), check mode (a converge in --check reports no
change) and verify; destroy stops the host, which this wrapper makes sure of."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.ansible.conftest import ROOT, VENV_BIN, ansible_env
from tests.hosts.hosts import missing_tools, stop_fleet

ROLES = sorted(p.parents[2].name for p in ROOT.glob("roles/*/molecule/systemd/molecule.yml"))
STEPS = ("create", "prepare", "converge", "idempotence", "check", "verify", "destroy")


def _section(out: str, step: str) -> str:
    start = out.find(f"[systemd > {step}] Executing")
    end = out.find(f"[systemd > {step}] Executed", start)
    return out[start:end] if start >= 0 and end >= 0 else ""


@pytest.mark.slow
@pytest.mark.skipif(bool(missing_tools()), reason="systemd test hosts need root and "
                    f"{', '.join(missing_tools())} (scripts/bootstrap)")
@pytest.mark.parametrize("role", ROLES)
def test_systemd_scenario(role: str, tmp_path: Path) -> None:
    ephemeral = tmp_path / "molecule"
    env = ansible_env(MOLECULE_EPHEMERAL_DIRECTORY=str(ephemeral), NO_COLOR="1")
    try:
        # One stream: the steps' INFO lines (stderr) and the plays' output (stdout) in order.
        proc = subprocess.run([str(VENV_BIN / "molecule"), "test", "-s", "systemd"],
                              cwd=ROOT / "roles" / role, env=env, timeout=1500, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
        out = proc.stdout
        (tmp_path / "molecule.log").write_text(out)
        assert proc.returncode == 0, out[-8000:]
        for step in STEPS:
            assert f"[systemd > {step}] Executed: Successful" in out, (
                f"molecule did not run {step}:\n{out[-3000:]}")
        check = _section(out, "check")
        recaps = re.findall(r"^\S+\s+: ok=\d+\s+changed=(\d+)", check, re.MULTILINE)
        assert recaps and set(recaps) == {"0"}, f"check mode reported changes:\n{check[-3000:]}"
        assert not (ephemeral / "hosts" / "fleet.json").exists(), "destroy left the hosts running"
    finally:
        stop_fleet(ephemeral / "hosts")

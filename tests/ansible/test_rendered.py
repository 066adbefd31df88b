"""The node's systemd unit, rendered with the role's own variables, loads in the tool that runs
it: systemd-analyze verify (offline). The public sites are the edge's (test_edge_sites.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.ansible.conftest import VENV_BIN, run, tail

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

PLAYBOOK = Path(__file__).parent / "playbooks" / "render_templates.yml"


def _render(out: Path) -> None:
    binary = out / "net-node"
    shutil.copy(VENV_BIN / "devnode", binary)
    proc = run(
        [
            str(VENV_BIN / "ansible-playbook"),
            "-i",
            "localhost,",
            str(PLAYBOOK),
            "-e",
            f"render_out={out} render_binary={binary}",
        ]
    )
    assert proc.returncode == 0, tail(proc)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rendered")
    _render(out)
    return out


def test_systemd_unit_is_hardened_and_verifies_offline(rendered: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian package systemd)")
    unit = rendered / "net-node.service"
    # ExecStart continues over lines; join them to read the command line.
    text = unit.read_text().replace(" \\\n    ", " ")
    for line in [
        "NoNewPrivileges=true",
        "ProtectSystem=strict",
        "PrivateTmp=true",
        f"ReadWritePaths={rendered}/var/lib/net/authority-0/data",
        "Restart=on-failure",
        "RestartSec=5",
        "LimitNOFILE=65536",
        "--validator",
        "--listen-addr /ip4/0.0.0.0/tcp/30333",
    ]:
        assert line in text, f"{line!r} missing from the unit:\n{text}"
    proc = subprocess.run(
        [analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60, check=False
    )
    # Warnings about the unit itself would name its file; other units' noise is not ours.
    ours = [ln for ln in (proc.stdout + proc.stderr).splitlines() if unit.name in ln]
    assert proc.returncode == 0 and not ours, proc.stdout + proc.stderr


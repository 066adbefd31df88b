"""Renders roles/monitoring's configuration from an inventory (the role's own render tasks)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RENDER = ROOT / "playbooks" / "monitoring_render.yml"


def render(inventory: Path, out: Path, *extra: str) -> Path:
    """The configuration the monitoring host of ``inventory`` would get, in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(inventory),
         str(RENDER), "-e", f"monitoring_render_dir={out}", "-e", f"net_state_dir={out}/state",
         *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (Debian package prometheus; scripts/bootstrap)")
    return path


@pytest.fixture(scope="session")
def local_render(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return render(ROOT / "inventories" / "local", tmp_path_factory.mktemp("local-render"))

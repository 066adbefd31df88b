"""playbooks/docs.yml in check mode on inventories/local: it reports what it would do and
writes nothing (no release store, no site, no nginx or supervisor files)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ops_tools.deploy.runner import strategy_env
from tests.docsite.conftest import DEVNODE, ROOT, VENV_BIN


def test_check_mode_changes_nothing(renders: dict[str, Path], tmp_path: Path) -> None:
    state = tmp_path / "state"
    # Check mode under the strategy ops-tools deploys with (mitogen), which must honour it too.
    env = {**os.environ, "NET_LOCALNET_DIR": str(state), "ANSIBLE_NOCOLOR": "1",
           **strategy_env(None)}
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", "inventories/local", "playbooks/docs.yml",
         "--check", "-e", f"net_chainspec_dir={renders['first']}",
         "-e", f"node_binary_src={DEVNODE}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert "changed: [docs-0]" in proc.stdout  # it says what a real run would change ...
    assert not state.exists()  # ... and changes nothing

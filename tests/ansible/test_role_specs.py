"""Each role's variables are described once: defaults/main.yml and meta/argument_specs.yml agree
(tests/ansible/role_specs.py), and each role's README.md is the one scripts/role-readmes writes
from the specs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.ansible.role_specs import disagreements
from tests.conftest import ROOT

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if p.is_dir())
SCRIPT = ROOT / "scripts" / "role-readmes"


def _load(path: Path) -> dict:
    return (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}


@pytest.mark.parametrize("role", ROLES)
def test_defaults_and_argument_specs_agree(role: str) -> None:
    base = ROOT / "roles" / role
    specs = _load(base / "meta" / "argument_specs.yml").get("argument_specs")
    assert specs, f"roles/{role}/meta/argument_specs.yml describes no entry point"
    assert disagreements(_load(base / "defaults" / "main.yml"), specs) == []


def test_each_kind_of_disagreement_is_found() -> None:
    specs = {"main": {"options": {
        "x_port": {"type": "int", "default": 80},
        "x_name": {"type": "str", "default": "a"},
        "x_seed": {"type": "str", "required": True},
        "x_path": {"type": "str", "default": ""},
        "x_mode": {"type": "str"},
        "x_only_in_specs": {"type": "int", "default": 1},
    }}}
    defaults = {"x_port": 8080, "x_name": "a", "x_seed": "s3cret", "x_extra": 1,
                "x_path": "{{ other }}", "x_mode": "0644"}
    found = disagreements(defaults, specs)
    assert [line.split(":", 1)[0] for line in found] == [
        "x_extra", "x_port", "x_seed", "x_path", "x_mode", "x_only_in_specs"]
    assert "8080" in found[1] and "80" in found[1]
    assert "required" in found[2] and "s3cret" not in "".join(found)


def test_the_readmes_are_up_to_date() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr


def test_a_stale_readme_is_named(tmp_path: Path) -> None:
    """The check above can fail: in a copy whose role README differs, --check names it."""
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "roles", copy / "roles", ignore=shutil.ignore_patterns("molecule"))
    (copy / "scripts").mkdir()
    shutil.copy(SCRIPT, copy / "scripts" / "role-readmes")
    readme = copy / "roles" / "node" / "README.md"
    readme.write_text(readme.read_text().replace("node_name", "node_nam"))
    proc = subprocess.run([sys.executable, str(copy / "scripts" / "role-readmes"), "--check"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1 and "roles/node/README.md: stale" in proc.stderr
    assert "roles/rpc/README.md" not in proc.stderr

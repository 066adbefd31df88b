"""The collection net.ops as an operator gets it: built from this checkout by ansible-galaxy,
installed with ansible-galaxy into a collections path outside the checkout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

from tests.conftest import ROOT

VENV_BIN = ROOT / ".venv" / "bin"
# What an operator's collection holds; the rest of the repository (the Python package, its tests
# and docs, benchmarks, scripts, molecule scenarios, caches) is build_ignore'd in galaxy.yml.
CONTENT = {"FILES.json", "MANIFEST.json", "README.md", "meta", "playbooks", "plugins", "roles",
           "inventories"}


def galaxy_env() -> dict[str, str]:
    """ansible-galaxy without the test run's ANSIBLE_* settings (an install runs outside the
    checkout, so this repository's ansible.cfg is not read either)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["ANSIBLE_NOCOLOR"] = "1"
    return env


def build(out: Path) -> Path:
    """``ansible-galaxy collection build`` from the root into ``out``; the artifact's path."""
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(out)],
        cwd=ROOT, env=galaxy_env(), capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (artifact,) = out.glob("net-ops-*.tar.gz")
    return artifact


def members(artifact: Path) -> list[str]:
    with tarfile.open(artifact) as tar:
        return tar.getnames()


def manifest(artifact: Path) -> dict:
    with tarfile.open(artifact) as tar:
        member = tar.extractfile("MANIFEST.json")
        assert member is not None
        return json.load(member)["collection_info"]


def install(artifact: Path, collections: Path) -> Path:
    """``ansible-galaxy collection install`` into ``collections``; the installed collection."""
    proc = subprocess.run(
        # --force: a net.ops in ~/.ansible (a molecule prerun's, say) would make it skip this one.
        [str(VENV_BIN / "ansible-galaxy"), "collection", "install", "--force", "-p",
         str(collections), str(artifact)],
        cwd=artifact.parent, env=galaxy_env(), capture_output=True, text=True, timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return collections / "ansible_collections" / "net" / "ops"


def copy_example_inventory(installed: Path, dest: Path) -> Path:
    """What inventories/operator/README.md tells an operator: copy the example, make it yours."""
    shutil.copytree(installed / "inventories" / "operator", dest)
    return dest

"""The artifact of ``ansible-galaxy collection build``: the Ansible content of net.ops and
nothing else, installable with ``ansible-galaxy collection install``. Its full node runs from
the installed copy in tests/operator/test_full_node_collection.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ansible.collection import CONTENT, build, install, manifest, members
from tests.conftest import ROOT

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)


def test_the_artifact_holds_the_ansible_content_only(tmp_path: Path) -> None:
    artifact = build(tmp_path / "dist")
    names = members(artifact)
    assert {name.split("/", 1)[0] for name in names} == CONTENT
    # Each plugin once, where Ansible looks for a collection's plugins.
    plugins = {name for name in names if name.startswith("plugins/") and name.endswith(".py")}
    assert plugins == {p.relative_to(ROOT).as_posix() for p in ROOT.glob("plugins/*/*.py")}
    assert "playbooks/full_node.yml" in names and "roles/node/tasks/main.yml" in names
    assert not [name for name in names if "/molecule/" in name or "__pycache__" in name]
    info = manifest(artifact)
    assert (info["namespace"], info["name"]) == ("net", "ops")


def test_it_installs_outside_the_checkout(tmp_path: Path) -> None:
    installed = install(build(tmp_path / "dist"), tmp_path / "collections")
    assert not installed.resolve().is_relative_to(ROOT)
    assert (installed / "playbooks" / "full_node.yml").is_file()
    assert (installed / "plugins" / "modules" / "net_service_converge.py").is_file()
    assert (installed / "MANIFEST.json").is_file()

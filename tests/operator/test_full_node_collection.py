"""The installed collection, as an operator uses it: ``ansible-galaxy collection install`` of the
artifact into a collections path outside the checkout, the example inventory copied from it, and
``ansible-playbook net.ops.full_node`` run from a directory that is not the checkout (no
ansible.cfg of this repository, no ANSIBLE_* of the test run) against a host over SSH."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from tests.ansible.collection import build, copy_example_inventory, install
from tests.conftest import ROOT
from tests.operator.conftest import HOST, Installed, LocalNet, Operator, Rendered, rpc


@pytest.mark.slow
def test_the_installed_collection_provisions_a_full_node(
    specs: dict[str, Rendered], localnet: LocalNet, operator: Operator, tmp_path: Path,
) -> None:
    current = specs["current"]
    localnet.start(current)
    collections = install(build(tmp_path / "dist"), tmp_path / "collections")
    workdir = Path(tempfile.mkdtemp(prefix="operator-", dir=operator.root))
    installed = Installed(tmp_path / "collections",
                          copy_example_inventory(collections, workdir / "my-node"), workdir)
    assert not workdir.resolve().is_relative_to(ROOT)
    assert not (workdir / "ansible.cfg").exists()

    first = operator.play(current, localnet.rpc_url, localnet.bootnodes, installed=installed)
    assert first.rc == 0, first.output
    assert first.recap[HOST]["failed"] == 0 and first.recap[HOST]["changed"] > 0
    assert "TASK [net.ops.node :" in first.stdout  # the role came from the collection
    assert rpc(operator.rpc_url, "chain_getBlockHash", [0]) == current.genesis
    manifest = json.loads((operator.node_root / "deployed.json").read_text())
    assert manifest["role"] == "full" and manifest["genesis_hash"] == current.genesis

    again = operator.play(current, localnet.rpc_url, localnet.bootnodes, installed=installed)
    assert again.rc == 0 and again.recap[HOST]["changed"] == 0, again.output

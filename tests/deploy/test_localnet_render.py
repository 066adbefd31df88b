"""The local spec's render is reused only while its inputs and files are unchanged; the finality
baseline is read only from a public endpoint serving the expected genesis."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ops_tools.deploy.localnet import _finalized_before, devnode_binary, render_local_spec
from tests.conftest import free_port

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)


def test_a_render_is_reused_until_its_files_change(tmp_path: Path) -> None:
    out = tmp_path / "chainspec"
    genesis, reused = render_local_spec(devnode_binary(), out)
    assert not reused
    assert json.loads((out / "manifest.json").read_text())["genesis_hash"] == genesis
    assert render_local_spec(devnode_binary(), out) == (genesis, True)
    raw = out / "raw.json"
    raw.write_bytes(raw.read_bytes().replace(b'"name"', b'"name" ', 1))
    assert render_local_spec(devnode_binary(), out) == (genesis, False)
    assert render_local_spec(devnode_binary(), out) == (genesis, True)


def test_no_baseline_without_a_public_node_answering(tmp_path: Path) -> None:
    assert _finalized_before(tmp_path, "0x00") is None
    (tmp_path / "rpc-0").mkdir()
    (tmp_path / "rpc-0" / "deployed.json").write_text(
        json.dumps({"role": "rpc", "rpc_port": free_port()})
    )
    assert _finalized_before(tmp_path, "0x00") is None

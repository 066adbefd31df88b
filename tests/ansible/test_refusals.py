"""What must stop a deploy before anything changes: a binary or spec whose checksum does not
match, a spec whose offline genesis differs from its render manifest, a missing variable."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from tests.ansible.conftest import ROOT, VENV_BIN, deploy_env, run, tail

APPLY_NODE = Path(__file__).parent / "playbooks" / "apply_node.yml"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _site(state: Path, spec_dir: Path, binary_sha: str) -> tuple[int, str]:
    proc = run(
        [
            str(VENV_BIN / "ansible-playbook"),
            "-i",
            "inventories/local",
            "playbooks/site.yml",
            "-e",
            f"net_chainspec_dir={spec_dir}",
            "-e",
            f"node_binary_src={VENV_BIN / 'devnode'}",
            "-e",
            f"node_binary_sha256={binary_sha}",
        ],
        env=deploy_env(NET_LOCALNET_DIR=str(state)),
    )
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture
def spec_copy(rendered_spec: Path, tmp_path: Path) -> Path:
    out = tmp_path / "spec"
    shutil.copytree(rendered_spec, out)
    return out


def test_binary_checksum_mismatch_stops_before_any_host(spec_copy: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    rc, out = _site(state, spec_copy, "0" * 64)
    assert rc != 0
    assert f"expected {'0' * 64} (node_binary_sha256)" in out, out[-3000:]
    assert _sha256(VENV_BIN / "devnode") in out  # what was seen
    assert not state.exists(), "a host was touched although pre-flight failed"


def test_spec_checksum_mismatch_stops_before_any_host(spec_copy: Path, tmp_path: Path) -> None:
    raw = spec_copy / "raw.json"
    raw.write_bytes(raw.read_bytes() + b"\n")
    state = tmp_path / "state"
    rc, out = _site(state, spec_copy, _sha256(VENV_BIN / "devnode"))
    assert rc != 0
    assert f"sha256 is {_sha256(raw)}" in out, out[-3000:]
    assert not state.exists()


def test_genesis_mismatch_stops_before_any_host(spec_copy: Path, tmp_path: Path) -> None:
    """A spec whose bytes match the manifest's checksum but whose genesis does not (a manifest
    edited to cover a changed storage value) is refused by the offline genesis computation."""
    raw = spec_copy / "raw.json"
    spec = json.loads(raw.read_bytes())
    top = spec["genesis"]["raw"]["top"]
    key = next(k for k in sorted(top) if k != "0x3a636f6465")  # any storage item but :code
    top[key] = top[key] + "00"
    raw.write_text(json.dumps(spec))
    manifest_path = spec_copy / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["raw_spec_sha256"] = _sha256(raw)
    manifest_path.write_text(json.dumps(manifest))
    state = tmp_path / "state"
    rc, out = _site(state, spec_copy, _sha256(VENV_BIN / "devnode"))
    assert rc != 0
    assert "genesis hash computed offline is" in out, out[-3000:]
    assert manifest["genesis_hash"] in out
    assert not state.exists()


def test_missing_required_variable_is_named(rendered_spec: Path, tmp_path: Path) -> None:
    proc = run(
        [
            str(VENV_BIN / "ansible-playbook"),
            "-i",
            "molecule-host,",
            str(APPLY_NODE),
            "-e",
            f"node_chainspec_src_dir={rendered_spec} node_binary_src={VENV_BIN / 'devnode'}",
            "-e",
            f"node_root_dir={tmp_path / 'node'}",
        ],
        cwd=ROOT,
    )
    assert proc.returncode != 0
    assert "node_binary_sha256" in proc.stdout + proc.stderr, tail(proc)
    assert not (tmp_path / "node").exists()

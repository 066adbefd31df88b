"""Development-node artifacts: the development node paired with the pallet-suite's runtime."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ops_tools.build.artifact import load_artifact
from ops_tools.build.builder import BuildRequest, build
from ops_tools.build.devnode_artifact import make_devnode_artifact
from ops_tools.errors import InputError
from tests.build.conftest import SuiteRepo, run_cli

DEVNODE = Path(sys.executable).parent / "devnode"


@pytest.fixture
def node_artifact(suite: SuiteRepo, cache: Path) -> Path:
    return build(BuildRequest(repo=str(suite.path), ref="main", cache=cache)).artifact.directory


@pytest.fixture
def installed_devnode() -> Path:
    try:
        proc = subprocess.run([str(DEVNODE), "--version"], capture_output=True, text=True,
                              timeout=60, check=False)
    except OSError as exc:
        pytest.fail(f"the development node is not installed ({DEVNODE}: {exc});"
                    " run scripts/bootstrap")
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.fail(f"`{DEVNODE} --version` fails: {last}")
    return DEVNODE


def _check_pairing(dev: Path, node: Path, version: str) -> None:
    art = load_artifact(dev)
    src = load_artifact(node)
    m = art.manifest
    assert m["kind"] == "devnode" and m["source_artifact"] == src.key
    assert m["devnode_version"] == version == m["node_version"]
    assert art.runtime.read_bytes() == src.runtime.read_bytes()
    for field in ("revision", "repo", "runtime_blake2_256", "runtime_spec_version",
                  "runtime_state_version", "features"):
        assert m[field] == src.manifest[field]
    launched = subprocess.run([str(art.node_binary), "--version"], capture_output=True, text=True,
                              timeout=60, check=True).stdout.strip()
    assert launched == version


def test_devnode_artifact_with_the_installed_devnode(node_artifact: Path, tmp_path: Path,
                                                     installed_devnode: Path):
    version = subprocess.run([str(installed_devnode), "--version"], capture_output=True,
                             text=True, check=True).stdout.strip()
    proc = run_cli("node", "devnode-artifact", "--from", str(node_artifact),
                   "--out", str(tmp_path / "dev"), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["artifact_dir"] == str(tmp_path / "dev")
    _check_pairing(tmp_path / "dev", node_artifact, version)


def test_devnode_artifact_mechanics_with_a_stand_in(node_artifact: Path, tmp_path: Path,
                                                    cache: Path):
    # Test double for the development node's executable (only `--version` is used here), so
    # that the artifact mechanics are covered whether or not ops_tools.devnode is installed.
    stand_in = tmp_path / "devnode stand-in"
    stand_in.write_text("#!/bin/sh\necho 'devnode 0.0.0-stand-in'\n")
    stand_in.chmod(0o755)
    art = make_devnode_artifact(node_artifact, cache=cache, devnode=str(stand_in))
    assert art.directory.parent == cache / "artifacts"
    assert art.key.startswith(load_artifact(node_artifact).key + "-devnode-")
    _check_pairing(art.directory, node_artifact, "devnode 0.0.0-stand-in")
    # A devnode artifact is not a source for another one.
    with pytest.raises(InputError, match="give a node artifact"):
        make_devnode_artifact(art.directory, out=tmp_path / "again", devnode=str(stand_in))


@pytest.mark.process  # ops-tools as a subprocess
def test_devnode_artifact_refuses_a_broken_source(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    proc = run_cli("node", "devnode-artifact", "--from", str(tmp_path / "empty"),
                   "--out", str(tmp_path / "dev"))
    assert proc.returncode == 2
    assert "manifest.json is missing" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "dev").exists()


def _genesis_with(artifact_dir: Path, tmp: Path) -> dict:
    """Raw spec from the artifact's devnode launcher, for a plain spec carrying its runtime."""
    from ops_tools.chainspec import compute_genesis, load_spec

    art = load_artifact(artifact_dir)
    plain = json.loads(subprocess.run([str(art.node_binary), "build-spec", "--chain", "local"],
                                      capture_output=True, text=True, timeout=120,
                                      check=True).stdout)
    plain["genesis"]["runtimeGenesis"]["code"] = "0x" + art.runtime.read_bytes().hex()
    plain_path = tmp / f"{art.key}-plain.json"
    plain_path.write_text(json.dumps(plain))
    raw = subprocess.run([str(art.node_binary), "build-spec", "--chain", str(plain_path), "--raw"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    raw_path = tmp / f"{art.key}-raw.json"
    raw_path.write_text(raw)
    return compute_genesis(load_spec(raw_path)).to_json()


def test_new_pallet_suite_revision_gives_a_new_local_genesis(suite: SuiteRepo, cache: Path,
                                                             tmp_path: Path,
                                                             installed_devnode: Path):
    node1 = build(BuildRequest(repo=str(suite.path), ref="main", cache=cache)).artifact
    suite.commit("commit 2: spec_version 7", suite.set_spec_version(7))
    node2 = build(BuildRequest(repo=str(suite.path), ref="main", cache=cache)).artifact
    dev1 = make_devnode_artifact(node1.directory, cache=cache)
    dev2 = make_devnode_artifact(node2.directory, cache=cache)
    g1 = _genesis_with(dev1.directory, tmp_path)
    g2 = _genesis_with(dev2.directory, tmp_path)
    assert g1["code_blake2_256"] == node1.manifest["runtime_blake2_256"]
    assert g2["code_blake2_256"] == node2.manifest["runtime_blake2_256"]
    assert (g1["spec_version"], g2["spec_version"]) == (6, 7)
    assert g1["genesis_hash"] != g2["genesis_hash"]

"""load_artifact: the public loader trusts a directory only when its checksums match."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ops_tools.build.artifact import load_artifact
from ops_tools.build.builder import BuildRequest, build
from ops_tools.errors import InputError
from tests.build.conftest import FIXTURE, SuiteRepo, git


@pytest.fixture(scope="module")
def built_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real build shared by the module; each test damages its own copy."""
    root = tmp_path_factory.mktemp("artifact")
    repo = SuiteRepo(root / "pallet-suite")
    shutil.copytree(FIXTURE, repo.path, ignore=shutil.ignore_patterns("target"))
    git(repo.path, "init", "-q", "-b", "main")
    repo.commit("commit 1")
    result = build(BuildRequest(repo=str(repo.path), ref="main", cache=root / "cache"))
    return result.artifact.directory


@pytest.fixture
def built(built_once: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(built_once, copy)
    return copy


def test_loads_a_good_artifact(built: Path):
    art = load_artifact(built)
    assert art.node_binary == built / "net-node"
    assert art.runtime == built / "net_runtime.compact.compressed.wasm"
    assert art.manifest["kind"] == "node"


def _rewrite(path: Path, **fields):
    data = json.loads((path / "manifest.json").read_text())
    data.update(fields)
    (path / "manifest.json").write_text(json.dumps(data))


@pytest.mark.parametrize(("damage", "needle"), [
    (lambda p: (p / "net-node").write_bytes(b"#!/bin/sh\n"), "node_binary 'net-node' has sha256"),
    (lambda p: (p / "net_runtime.compact.compressed.wasm").write_bytes(b"\0asm\1\0\0\0"),
     "runtime 'net_runtime.compact.compressed.wasm' has sha256"),
    (lambda p: (p / "net_runtime.compact.compressed.wasm").unlink(), "runtime file"),
    (lambda p: (p / "manifest.json").unlink(), "manifest.json is missing"),
    (lambda p: (p / "manifest.json").write_text("{"), "not readable JSON"),
    (lambda p: (p / "net-node").chmod(0o644), "not executable"),
    (lambda p: _rewrite(p, node_binary="../copy/net-node"), "not a plain file name"),
    (lambda p: _rewrite(p, runtime_blake2_256="0x" + "0" * 64), "blake2_256"),
    (lambda p: _rewrite(p, runtime_spec_version=None), "runtime_spec_version"),
])
def test_damage_is_named(built: Path, damage, needle):
    damage(built)
    with pytest.raises(InputError, match=r"^artifact ") as info:
        load_artifact(built)
    assert needle in str(info.value)


def test_not_a_directory(tmp_path: Path):
    with pytest.raises(InputError, match="not a directory"):
        load_artifact(tmp_path / "missing")

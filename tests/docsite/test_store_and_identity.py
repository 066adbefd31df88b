"""The release store with real renders of chainspec/networks/local.yml, and the chain identity
read back from the published raw spec (compared with the network definition, not with copies)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from ops_tools.chainspec.genesis import genesis_of_file
from ops_tools.docsite.identity import identity_of_file
from ops_tools.docsite.store import publish_release, read_index
from ops_tools.errors import InputError
from tests.docsite.conftest import DEVNODE, LOCAL_NETWORK


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_published_files_are_the_render_byte_for_byte(renders: dict[str, Path],
                                                      tmp_path: Path) -> None:
    store = tmp_path / "store"
    result = publish_release(store, renders["first"], DEVNODE, "devnode")
    manifest = json.loads((renders["first"] / "manifest.json").read_text())
    genesis = manifest["genesis_hash"]
    assert result.changed and result.current["genesis_hash"] == genesis
    folder = store / genesis
    assert sha256(folder / "raw.json") == manifest["raw_spec_sha256"]
    rendered_manifest = (renders["first"] / "manifest.json").read_bytes()
    assert (folder / "manifest.json").read_bytes() == rendered_manifest
    assert sha256(folder / "devnode") == sha256(DEVNODE)
    (entry,) = read_index(store)["releases"]
    assert entry["files"]["raw.json"]["sha256"] == manifest["raw_spec_sha256"]
    assert entry["runtime_spec_version"] == manifest["runtime"]["spec_version"]
    assert "0x" + genesis_of_file(folder / "raw.json").genesis_hash.hex() == genesis
    # Again: nothing changes, not even the index file.
    before = (store / "index.json").stat().st_mtime_ns
    assert not publish_release(store, renders["first"], DEVNODE, "devnode").changed
    assert (store / "index.json").stat().st_mtime_ns == before


def test_a_second_render_replaces_the_first(renders: dict[str, Path], tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = publish_release(store, renders["first"], DEVNODE, "devnode").current["genesis_hash"]
    second = publish_release(store, renders["second"], DEVNODE, "devnode")
    assert second.replaced is not None and second.replaced["genesis_hash"] == first
    index = read_index(store)
    assert [r["status"] for r in index["releases"]] == ["current", "replaced"]
    assert index["releases"][1]["replaced_by"] == second.current["genesis_hash"] != first
    assert (store / first / "raw.json").is_file()  # old releases stay downloadable


def test_a_raw_spec_that_does_not_match_its_manifest_is_refused(renders: dict[str, Path],
                                                                tmp_path: Path) -> None:
    bad = tmp_path / "render"
    shutil.copytree(renders["first"], bad)
    shutil.copy(renders["second"] / "raw.json", bad / "raw.json")
    with pytest.raises(InputError, match="differs from its manifest"):
        publish_release(tmp_path / "store", bad, DEVNODE, "devnode")
    assert not (tmp_path / "store" / "index.json").exists()


def test_bad_inputs_name_what_is_wrong(renders: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"--render-dir .*no manifest\.json"):
        publish_release(tmp_path / "s", tmp_path, DEVNODE, "devnode")
    with pytest.raises(InputError, match=r"--node-binary .*no such file"):
        publish_release(tmp_path / "s", renders["first"], tmp_path / "nope", "devnode")
    with pytest.raises(InputError, match="--node-kind 'docker'"):
        publish_release(tmp_path / "s", renders["first"], DEVNODE, "docker")
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "index.json").write_text("{")
    with pytest.raises(InputError, match=r"index\.json: not JSON"):
        read_index(tmp_path / "s")


def test_identity_is_what_the_network_definition_says(renders: dict[str, Path]) -> None:
    definition = yaml.safe_load(LOCAL_NETWORK.read_text())
    manifest = json.loads((renders["first"] / "manifest.json").read_text())
    i = identity_of_file(renders["first"] / "raw.json")
    assert (i.name, i.id, i.protocol_id) == (
        definition["name"], definition["id"], definition["protocol_id"])
    assert (i.token_symbol, i.token_decimals, i.ss58_prefix) == (
        definition["token"]["symbol"], definition["token"]["decimals"], definition["ss58_prefix"])
    assert i.min_stake == definition["operator_stake"]["min_stake"]
    assert i.max_heartbeat_epoch_advance == (
        definition["operator_stake"]["max_heartbeat_epoch_advance"])
    assert i.epoch_length == definition["consensus"]["epoch_length_blocks"]
    assert i.spec_version == manifest["runtime"]["spec_version"]
    # The other render carries another runtime version: the identity follows the spec's :code.
    assert identity_of_file(renders["second"] / "raw.json").spec_version == i.spec_version + 1


def test_a_plain_spec_has_no_identity_to_read(renders: dict[str, Path]) -> None:
    with pytest.raises(InputError, match="not raw"):
        identity_of_file(renders["first"] / "plain.json")

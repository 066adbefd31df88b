"""Genesis hashes of real public networks: an implementation reproduces them or is wrong."""

from __future__ import annotations

import pytest

from ops_tools.chainspec import compute_genesis, load_spec

PUBLISHED = {
    "westend.raw.json": ("0xe143f23803ac50e8f6f8e62695d1ce9e4e1d68aa36c1cd2cfd15340213f3423e", 0),
    "polkadot-collectives.raw.json": (
        "0x46ee89aa2eedd13e988962630ec9fb7565964cf5023bb351f2b6b25c1b68b0b2",
        0,
    ),
    "kusama-coretime.raw.json": (
        "0x638cd2b9af4b3bb54b8c1f0d22711fc89924ca93300f0caf25a580432b29d050",
        1,
    ),
    "polkadot.light.json": (
        "0x91b171bb158e2d3848fa23a9f1c25182fb8e20313b2c1eb49219da7a70ce90c3",
        None,
    ),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_genesis_hash(vectors_dir, name):
    expected_hash, expected_version = PUBLISHED[name]
    info = compute_genesis(load_spec(vectors_dir / name))
    assert "0x" + info.genesis_hash.hex() == expected_hash
    assert info.state_version == expected_version


def test_westend_runtime_has_no_version_section_and_so_state_version_0(vectors_dir):
    info = compute_genesis(load_spec(vectors_dir / "westend.raw.json"))
    assert info.runtime is None


def test_compressed_runtime_is_read(vectors_dir):
    info = compute_genesis(load_spec(vectors_dir / "kusama-coretime.raw.json"))
    assert info.runtime is not None
    assert info.runtime.spec_name == "coretime-kusama"
    assert info.storage_keys == 64


def test_wrong_state_version_gives_another_hash(vectors_dir):
    spec = load_spec(vectors_dir / "kusama-coretime.raw.json")
    assert compute_genesis(spec, state_version=0).genesis_hash != compute_genesis(spec).genesis_hash

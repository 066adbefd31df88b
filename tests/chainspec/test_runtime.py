from __future__ import annotations

import pytest
import zstandard

from ops_tools.chainspec.runtime import (
    ZSTD_PREFIX,
    RuntimeVersion,
    _custom_section,
    api,
    build_runtime_blob,
    decompress_code,
    encode_runtime_version,
    read_runtime_version,
)
from ops_tools.errors import InputError

VERSION = RuntimeVersion(
    "net-dev", "net-dev-node", 1, 6, 2, 3, 1, [api("Core", 5), api("Metadata", 2)]
)


def test_version_round_trips_through_a_wasm_blob():
    assert read_runtime_version(build_runtime_blob(VERSION)) == VERSION


def test_compressed_blob_is_inflated():
    blob = build_runtime_blob(VERSION, compress=True)
    assert blob.startswith(ZSTD_PREFIX)
    assert read_runtime_version(blob) == VERSION


def test_old_core_api_reads_state_version_0():
    old = RuntimeVersion("old", "old", 1, 1, 1, 1, 1, [api("Core", 3)])
    assert read_runtime_version(build_runtime_blob(old)).state_version == 0


def test_module_without_sections_has_no_version():
    assert read_runtime_version(b"\x00asm\x01\x00\x00\x00") is None


def test_api_names_are_known():
    names = [a["name"] for a in VERSION.to_json()["apis"]]
    assert names == ["Core", "Metadata"]


def test_not_wasm_is_refused():
    with pytest.raises(InputError, match="not a wasm module"):
        read_runtime_version(b"\x7fELF not a runtime")


def test_truncated_section_is_refused():
    blob = build_runtime_blob(VERSION)
    with pytest.raises(InputError, match="overruns"):
        read_runtime_version(blob[:-3])


def test_clipped_api_list_is_refused():
    blob = (
        b"\x00asm\x01\x00\x00\x00"
        + _custom_section("runtime_version", encode_runtime_version(VERSION))
        + _custom_section("runtime_apis", b"\x01" * 13)
    )
    with pytest.raises(InputError, match="clipped"):
        read_runtime_version(blob)


def test_compression_bomb_is_refused_without_inflating_it_all():
    bomb = ZSTD_PREFIX + zstandard.ZstdCompressor().compress(b"\x00" * (2 * 1024 * 1024))
    assert len(bomb) < 10_000
    with pytest.raises(InputError, match="inflates past the bound"):
        decompress_code(bomb, limit=1024 * 1024)
    assert len(decompress_code(bomb, limit=4 * 1024 * 1024)) == 2 * 1024 * 1024


def test_invalid_zstd_is_refused():
    with pytest.raises(InputError, match="not valid zstd"):
        decompress_code(ZSTD_PREFIX + b"garbage")

"""The fast paths of a large genesis (bulk trie, forked workers, byte scanner) against the oracle.

Thresholds are lowered so that small inputs take the paths a million-entry genesis takes; the
results must equal the independent reference trie and the general (whole-JSON) path.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zstandard

from ops_tools.chainspec import (
    compute_genesis,
    forked,
    genesis,
    load_spec,
    spec_scan,
    trie,
    trie_bulk,
)
from ops_tools.chainspec.genesis import genesis_of_file
from ops_tools.chainspec.runtime import ZSTD_PREFIX, RuntimeVersion, api, build_runtime_blob
from ops_tools.chainspec.sorted_storage import argsort_rows
from ops_tools.chainspec.trie import trie_root
from ops_tools.chainspec.trie_bulk import adjacent_lcp
from tests.chainspec.reference_trie import reference_root
from tests.chainspec.test_vectors import PUBLISHED

BOTH = pytest.mark.parametrize("version", [0, 1])
RUNTIME = RuntimeVersion("net-dev", "net-dev-node", 1, 6, 1, 1, 1, [api("Core", 5)])


@pytest.fixture
def small_thresholds(monkeypatch):
    """Bulk builder from 8 keys, numpy ranges from 2, two processes from 40, scanning always."""
    monkeypatch.setattr(trie, "BULK_MIN_KEYS", 8)
    monkeypatch.setattr(trie_bulk, "VECTOR_MIN_KEYS", 2)
    monkeypatch.setattr(trie_bulk, "PARALLEL_MIN_KEYS", 40)
    monkeypatch.setattr(genesis, "SCAN_AT_LEAST", 0)


def _bytes(rng: random.Random, n: int) -> bytes:
    return bytes(rng.randrange(256) for _ in range(n))


def _mixed_entries(rng: random.Random, n: int, key_len: int) -> dict[bytes, bytes]:
    """A storage-map-like run of one key length, plus keys of other lengths around it."""
    prefix = _bytes(rng, min(key_len - 1, rng.choice([0, 2, 16])))
    entries: dict[bytes, bytes] = {}
    for _ in range(n):
        key = prefix + _bytes(rng, key_len - len(prefix))
        if rng.random() < 0.2:
            key = key[:-1] + bytes([rng.randrange(2)])  # neighbours differing in the last nibble
        entries[key] = _bytes(rng, rng.choice([80, 80, 80, 0, 1, 32, 33]))
    for _ in range(rng.choice([0, 3, 12])):
        entries[_bytes(rng, rng.choice([0, 1, 2, key_len + 3]))] = _bytes(rng, rng.choice([1, 40]))
    some = next(iter(entries))
    entries[some[:-1]] = b"a key that is a prefix of a bulk key"
    return entries


@pytest.mark.process
@BOTH
@pytest.mark.parametrize("seed", range(12))
def test_bulk_trie_matches_reference(small_thresholds, version, seed):
    rng = random.Random(seed)
    entries = _mixed_entries(rng, rng.choice([30, 200, 600]), rng.choice([2, 5, 32, 48]))
    assert trie_root(entries, version) == reference_root(entries, version)


@pytest.mark.process
@BOTH
def test_bulk_trie_with_uniform_values_and_workers(small_thresholds, version):
    rng = random.Random(99)
    entries = {b"\x26\xaa" * 16 + _bytes(rng, 48): _bytes(rng, 80) for _ in range(3000)}
    entries[b":code"] = b"\x00asm"
    assert trie_root(entries, version) == reference_root(entries, version)


@pytest.mark.process
@BOTH
def test_small_values_are_inlined_by_the_general_builder(small_thresholds, version):
    # Two-byte keys and one-byte values: leaves shorter than 32 bytes, inlined in their parent.
    entries = {bytes([a, b]): bytes([a ^ b]) for a in range(0, 256, 7) for b in range(0, 256, 5)}
    assert trie_root(entries, version) == reference_root(entries, version)


def test_rows_sort_as_byte_strings_even_with_long_ties():
    rng = random.Random(5)
    rows = [b"\x01" * 20 + _bytes(rng, 1) + b"\x02" * 9 + _bytes(rng, 2) for _ in range(500)]
    rows = sorted(set(rows), key=lambda _: rng.random())
    array = np.frombuffer(b"".join(rows), np.uint8).reshape(len(rows), 32)
    order = argsort_rows(array)
    assert [rows[i] for i in order] == sorted(rows)


def test_adjacent_common_prefix_in_nibbles():
    rows = sorted([b"\x12\x34\x56", b"\x12\x34\x57", b"\x12\x44\x00", b"\x92\x00\x00"])
    array = np.frombuffer(b"".join(rows), np.uint8).reshape(4, 3)
    assert adjacent_lcp(array).tolist() == [5, 2, 0]


def test_duplicate_rows_are_an_input_error():
    array = np.frombuffer(b"\x01\x02" * 3, np.uint8).reshape(3, 2)
    with pytest.raises(trie.DuplicateKeyError, match="appears twice"):
        adjacent_lcp(array)


def _spec_json(top: dict[str, str], indent: int | None) -> str:
    document = {
        "name": "NET Test",
        "id": "net_test",
        "properties": {"top": {"0x00": "0x00"}},  # a decoy "top" before the real one
        "genesis": {"raw": {"top": top, "childrenDefault": {}}},
    }
    return json.dumps(document, indent=indent)


def _hex_top(entries: dict[bytes, bytes]) -> dict[str, str]:
    return {"0x" + k.hex(): "0x" + v.hex() for k, v in entries.items()}


def _storage(seed: int, n: int = 400) -> dict[bytes, bytes]:
    rng = random.Random(seed)
    entries = {b"\x26\xaa" * 16 + _bytes(rng, 48): _bytes(rng, 80) for _ in range(n)}
    entries.update({_bytes(rng, 40): _bytes(rng, rng.choice([1, 50])) for _ in range(5)})
    entries[b":code"] = build_runtime_blob(RUNTIME)
    return entries


def _general(path: Path, version: int) -> bytes:
    """The genesis hash by the general path (whole-JSON parse, dict, bisecting builder)."""
    return compute_genesis(load_spec(path), state_version=version).genesis_hash


@pytest.mark.process
@BOTH
@pytest.mark.parametrize("indent", [None, 2])
@pytest.mark.parametrize("fork", [True, False])
def test_scanned_spec_gives_the_general_paths_hash(
    small_thresholds, tmp_path, monkeypatch, version, indent, fork
):
    if not fork:  # as on a platform without fork, or in a process running threads
        monkeypatch.setattr(forked, "can_fork", lambda: False)
    path = tmp_path / "spec.json"
    entries = _storage(indent or 0)
    path.write_text(_spec_json(_hex_top(entries), indent))
    scanned = spec_scan.scan_raw_spec(path, path.read_bytes())
    assert scanned is not None and len(scanned.top) == len(entries)
    fast = genesis_of_file(path, version)
    monkeypatch.setattr(trie, "BULK_MIN_KEYS", 10**9)
    assert fast.genesis_hash == _general(path, version)
    assert fast.storage_keys == len(entries)
    root = reference_root(entries, version)
    assert fast.state_root == root


@pytest.mark.process
@pytest.mark.parametrize(
    "mangle",
    [
        # a key given twice: JSON keeps the last, as the general path does
        lambda text, k: text.replace(f'"{k}": ', f'"{k}": "0x01", "{k}": ', 1),
        # uppercase hex digits
        lambda text, k: text.replace(k, k.upper().replace("0X", "0x"), 1),
        # an escaped character inside a key
        lambda text, k: text.replace(k, "\\u0030x" + k[2:], 1),
        # irregular whitespace
        lambda text, k: text.replace(f'"{k}": ', f'"{k}" : ', 1),
    ],
)
def test_unusual_layouts_fall_back_to_the_general_path(small_thresholds, tmp_path, mangle):
    entries = _storage(7)
    text = _spec_json(_hex_top(entries), None)
    key = "0x" + sorted(k for k in entries if len(k) == 80)[3].hex()
    path = tmp_path / "spec.json"
    path.write_text(mangle(text, key))
    assert genesis_of_file(path).genesis_hash == compute_genesis(load_spec(path)).genesis_hash


@pytest.mark.process  # large specs are hashed in worker processes
@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_public_vectors_through_the_fast_paths(small_thresholds, vectors_dir, name):
    path = vectors_dir / name
    if name.endswith(".raw.json"):
        assert spec_scan.scan_raw_spec(path, path.read_bytes()) is not None
    assert "0x" + genesis_of_file(path).genesis_hash.hex() == PUBLISHED[name][0]


# --- The command on a spec large enough for the scanner (no monkeypatching in a subprocess) ----


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ops_tools.cli.main", "chainspec", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _large_spec(tmp_path: Path, mutate=None) -> Path:
    rng = random.Random(3)
    top = {
        "0x" + (b"\x26\xaa" * 16 + _bytes(rng, 48)).hex(): "0x" + _bytes(rng, 80).hex()
        for _ in range(trie.BULK_MIN_KEYS + 2000)
    }
    top["0x3a636f6465"] = "0x" + build_runtime_blob(RUNTIME).hex()
    if mutate:
        mutate(top)
    path = tmp_path / "large.json"
    path.write_text(_spec_json(top, None))
    assert path.stat().st_size >= genesis.SCAN_AT_LEAST
    return path


@pytest.mark.process
def test_large_spec_hash_on_the_command_line(tmp_path):
    path = _large_spec(tmp_path)
    result = _run("genesis-hash", str(path), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["genesis_hash"] == "0x" + compute_genesis(load_spec(path)).genesis_hash.hex()
    assert data["storage_keys"] == trie.BULK_MIN_KEYS + 2001


def _second_bulk_key(top: dict[str, str]) -> str:
    return sorted(k for k in top if len(k) == 162)[1]


@pytest.mark.process
@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda top: top.__setitem__(_second_bulk_key(top), "0xzz"), "not hex"),
        (lambda top: top.__setitem__(_second_bulk_key(top), "0x123"), "odd number of hex digits"),
        (lambda top: top.__setitem__(_second_bulk_key(top), 7), "expected a hex string"),
        (lambda top: top.__setitem__("0x" + "gg" * 80, "0x00"), "not hex"),
        (lambda top: top.pop("0x3a636f6465"), "no ':code'"),
        (lambda top: top.__setitem__("0x3a636f6465", "0x7f454c46"), "not a wasm module"),
        (
            lambda top: top.__setitem__(_second_bulk_key(top).upper().replace("0X", "0x"), "0x00"),
            "appears twice",
        ),
    ],
)
def test_bad_large_specs_get_one_clear_line(tmp_path, mutate, needle):
    result = _run("genesis-hash", str(_large_spec(tmp_path, mutate)))
    assert result.returncode == 2, result
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], lines


@pytest.mark.process
def test_large_compression_bomb_gets_one_clear_line(tmp_path):
    bomb = ZSTD_PREFIX + zstandard.ZstdCompressor().compress(b"\x00" * (60 * 1024 * 1024))
    path = _large_spec(tmp_path, lambda top: top.__setitem__("0x3a636f6465", "0x" + bomb.hex()))
    result = _run("genesis-hash", str(path))
    assert result.returncode == 2 and "inflates past the bound" in result.stderr

"""Edge cases of the trie root, checked against an independent reference implementation."""

from __future__ import annotations

import random

import pytest

from ops_tools.chainspec.hashing import blake2_256
from ops_tools.chainspec.trie import _LEAF, EMPTY_TRIE_ROOT, node_header, trie_root
from tests.chainspec.reference_trie import reference_root

BOTH = pytest.mark.parametrize("version", [0, 1])


def check(entries: dict[bytes, bytes], version: int) -> bytes:
    root = trie_root(entries, version)
    assert root == reference_root(entries, version)
    return root


def test_empty_trie_is_hash_of_the_empty_node():
    assert blake2_256(b"\x00") == EMPTY_TRIE_ROOT
    assert (
        EMPTY_TRIE_ROOT.hex() == "03170a2e7597b7b7e3d84c05391d139a62b157e78786d8c082f29dcf4c111314"
    )
    for version in (0, 1):
        assert trie_root({}, version) == EMPTY_TRIE_ROOT


@BOTH
def test_single_key_is_one_hashed_leaf(version):
    root = check({b"\x01\x23": b"v"}, version)
    # leaf header 0x40 | 4 nibbles, key bytes, compact(1), value
    assert root == blake2_256(bytes([0x44, 0x01, 0x23, 0x04]) + b"v")


@BOTH
def test_empty_key_and_empty_value(version):
    check({b"": b"root value", b"\x10": b""}, version)


@BOTH
def test_key_that_is_a_prefix_of_another(version):
    check({b"\xab": b"short", b"\xab\xcd": b"long", b"\xab\xcd\xef": b"longer"}, version)
    check({b"\xab\xc0": b"x", b"\xab\xc1": b"y", b"\xab": b"z"}, version)


@BOTH
def test_odd_nibble_partials(version):
    check({b"\x12\x34": b"a", b"\x12\x35": b"b", b"\x13": b"c"}, version)


def test_value_of_exactly_32_bytes_is_inline_in_both_versions():
    entries = {b"\x01": b"\xaa" * 32, b"\x02": b"b"}
    assert check(entries, 0) == check(entries, 1)


def test_value_of_33_bytes_is_hashed_out_in_version_1_only():
    entries = {b"\x01": b"\xaa" * 33, b"\x02": b"b"}
    v0, v1 = check(entries, 0), check(entries, 1)
    assert v0 != v1
    # A single leaf with a hashed value: header 0b001 | nibbles, key, blake2(value)
    single = {b"\x01": b"\xaa" * 33}
    assert trie_root(single, 1) == blake2_256(bytes([0x22, 0x01]) + blake2_256(b"\xaa" * 33))


@BOTH
def test_branch_with_a_large_value(version):
    check({b"\x01": b"\x55" * 40, b"\x01\x02": b"c", b"\x01\x03": b"d" * 50}, version)


@pytest.mark.parametrize(
    ("nibbles", "header"),
    [(62, "7e"), (63, "7f00"), (64, "7f01"), (317, "7ffe"), (318, "7fff00"), (572, "7ffffe")],
)
def test_multi_byte_headers(nibbles, header):
    assert node_header(_LEAF, nibbles).hex() == header


@BOTH
@pytest.mark.parametrize("key_len", [31, 32, 33, 160, 200])
def test_long_partial_keys(version, key_len):
    # 2 * key_len nibbles: past 62 the header spills into more bytes
    check({bytes([7]) * key_len: b"v", bytes([7]) * (key_len - 1) + b"\x08": b"w" * 40}, version)


@BOTH
def test_many_keys_match_reference_and_ignore_insertion_order(version):
    rng = random.Random(1234)
    entries = {}
    for _ in range(600):
        key = bytes(rng.randrange(256) for _ in range(rng.choice([1, 2, 3, 8, 32, 48])))
        entries[key] = bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 31, 32, 33, 80])))
    root = check(entries, version)
    items = list(entries.items())
    rng.shuffle(items)
    assert trie_root(items, version) == root
    assert trie_root(dict(reversed(items)), version) == root


@BOTH
def test_any_change_changes_the_root(version):
    base = {b"\x01\x02": b"a", b"\x01\x03": b"b", b"\x02": b"c" * 40}
    root = trie_root(base, version)
    assert trie_root({**base, b"\x01\x03": b"B"}, version) != root
    assert trie_root({**base, b"\x01\x04": b"b"}, version) != root
    assert trie_root({k: v for k, v in base.items() if k != b"\x02"}, version) != root


def test_deeply_nested_prefix_chain_does_not_hit_the_recursion_limit():
    entries = {b"\x11" * i: bytes([i % 256]) for i in range(1, 1500)}
    assert trie_root(entries, 1) == trie_root(dict(reversed(list(entries.items()))), 1)


def test_child_tries_enter_the_top_trie_under_their_prefixed_key():
    from ops_tools.chainspec.genesis import state_root_of
    from ops_tools.chainspec.spec import RawStorage

    top = {b":code": b"\x00asm", b"\xaa": b"x"}
    child = {b"\x01\x02": b"child value"}
    storage = RawStorage(top, {b"key": child})
    expected_top = dict(top)
    expected_top[b":child_storage:default:key"] = reference_root({b"\x01\x02": b"child value"}, 1)
    assert state_root_of(storage, 1) == reference_root(expected_top, 1)
    # an empty child trie leaves no trace
    assert state_root_of(RawStorage(top, {b"key": {}}), 1) == trie_root(top, 1)

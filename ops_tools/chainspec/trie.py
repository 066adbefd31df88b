"""Substrate's base-16 Patricia-Merkle trie root (``sp-trie`` layouts V0 and V1).

Node codec (``sp_trie::NodeCodec``), header first byte by node kind:
  leaf 0b01xxxxxx, branch without value 0b10xxxxxx, branch with value 0b11xxxxxx,
  leaf with hashed value 0b001xxxxx, branch with hashed value 0b0001xxxx,
where the x bits start the partial key's nibble count. The partial key follows, packed two
nibbles a byte; an odd count puts the first nibble alone in the low half of the first byte.
State version 1 stores values of 33 bytes or more as their Blake2-256 hash. A child whose
encoding is shorter than 32 bytes is inlined in its parent; the root is always hashed.

The builder here recurses over a sorted key list and finds each child's range by bisection.
A map with a large run of keys of one length (a genesis is mostly a few big storage maps) goes
to ``trie_bulk`` instead, which needs numpy: it is imported only then, so that importing this
module (the development node does, for every block) stays cheap.
"""

from __future__ import annotations

import hashlib
import sys
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache

from ops_tools.chainspec.hashing import blake2_256
from ops_tools.chainspec.scale import encode_compact
from ops_tools.errors import InputError

EMPTY_TRIE_ROOT = blake2_256(b"\x00")

# Values at least this long are hashed out of their node under state version 1.
V1_VALUE_HASH_THRESHOLD = 33
NIBBLE_SIZE_BOUND = 65535

_LEAF = (0b01 << 6, 2)
_BRANCH_NO_VALUE = (0b10 << 6, 2)
_BRANCH_WITH_VALUE = (0b11 << 6, 2)
_HASHED_VALUE_LEAF = (0b001 << 5, 3)
_HASHED_VALUE_BRANCH = (0b0001 << 4, 4)

_HASH_REF_PREFIX = encode_compact(32)

# A map needs this many keys of one length to be worth numpy's import and fixed costs.
BULK_MIN_KEYS = 2048


class DuplicateKeyError(InputError):
    """Two keys of the input decode to the same bytes."""


def duplicate_key(key: bytes) -> DuplicateKeyError:
    return DuplicateKeyError(
        f"storage key 0x{key.hex()} appears twice (hex keys are case-insensitive); keep one"
    )


@lru_cache(maxsize=4096)
def node_header(kind: tuple[int, int], nibble_count: int) -> bytes:
    """Header byte(s): kind bits, then the nibble count spilling into extra bytes."""
    if nibble_count > NIBBLE_SIZE_BOUND:
        raise InputError(
            f"a storage key needs a partial key of {nibble_count} nibbles; the trie allows at most"
            f" {NIBBLE_SIZE_BOUND} (keys of at most 32767 bytes)"
        )
    prefix, prefix_bits = kind
    max_value = 255 >> prefix_bits
    first = min(max_value - 1, nibble_count)
    if nibble_count == first:
        return bytes((prefix + nibble_count,))
    out = bytearray((prefix + max_value,))
    rem = nibble_count - first
    while rem > 0:
        if rem < 256:
            out.append(rem - 1)
            rem = 0
        else:
            out.append(255)
            rem -= 255
    return bytes(out)


def packed_nibbles(key: bytes, start: int, end: int) -> bytes:
    """Nibbles ``start:end`` of ``key``, packed as a partial key (aligned to the end)."""
    if not (start | end) & 1:
        return key[start >> 1 : end >> 1]
    nibbles = key.hex()[start:end]
    return bytes.fromhex("0" + nibbles if len(nibbles) & 1 else nibbles)


def node_builder(
    keys: Sequence[bytes],
    values: Sequence[bytes],
    state_version: int,
    delegate: Callable[[int, int, int], bytes | None] | None = None,
) -> Callable[[int, int, int], bytes]:
    """``node(lo, hi, depth)``: the encoded node over sorted byte ``keys[lo:hi]`` (and ``values``).

    ``delegate(lo, hi, depth)``, when given, may encode a range of two keys or more another way
    (the bulk builder) and returns None when it does not.

    Written as one closure with local names and the leaf case inlined in the branch loop:
    attribute look-ups and calls dominate here. Depths are in nibbles; a leaf's partial key from
    an odd depth is the low nibble of one byte plus the rest of the key, which is exactly its
    packed encoding.
    """
    hash_values = state_version == 1
    threshold = V1_VALUE_HASH_THRESHOLD
    blake2b = hashlib.blake2b
    compact = encode_compact
    hash_ref = _HASH_REF_PREFIX
    packed = packed_nibbles
    leaf_headers: dict[tuple[bool, int], bytes] = {}

    def leaf(key: bytes, value: bytes, depth: int) -> bytes:
        n = 2 * len(key) - depth
        hashed = hash_values and len(value) >= threshold
        header = leaf_headers.get((hashed, n))
        if header is None:
            header = leaf_headers[(hashed, n)] = node_header(
                _HASHED_VALUE_LEAF if hashed else _LEAF, n
            )
        if depth & 1:
            partial_key = bytes((key[depth >> 1] & 15,)) + key[(depth >> 1) + 1 :]
        else:
            partial_key = key[depth >> 1 :]
        if hashed:
            return header + partial_key + blake2b(value, digest_size=32).digest()
        return header + partial_key + compact(len(value)) + value

    def node(lo: int, hi: int, depth: int) -> bytes:
        if hi - lo == 1:
            return leaf(keys[lo], values[lo], depth)
        if delegate is not None:
            encoded = delegate(lo, hi, depth)
            if encoded is not None:
                return encoded
        first, last = keys[lo], keys[hi - 1]
        # Sorted keys: the range's common prefix is that of its first and last key.
        start_byte = depth >> 1
        p = 2 * start_byte + common_nibbles(first[start_byte:], last[start_byte:])
        start = lo
        value_part = b""
        kind = _BRANCH_NO_VALUE
        if 2 * len(first) == p:
            # The first key ends where the branch is: it is the branch's value.
            value = values[lo]
            if hash_values and len(value) >= threshold:
                value_part, kind = blake2b(value, digest_size=32).digest(), _HASHED_VALUE_BRANCH
            else:
                value_part, kind = compact(len(value)) + value, _BRANCH_WITH_VALUE
            start = lo + 1
        bitmap = 0
        ranges: list[tuple[int, int]] = []
        i = start
        below = p + 1
        byte_at = p >> 1
        odd = p & 1
        while i < hi:
            key = keys[i]
            b = key[byte_at]
            nibble = b & 15 if odd else b >> 4
            if nibble == 15:
                end = hi
            elif odd:
                end = bisect_left(
                    keys, key[:byte_at] + bytes(((b & 0xF0) | (nibble + 1),)), i + 1, hi
                )
            else:
                end = bisect_left(keys, key[:byte_at] + bytes(((nibble + 1) << 4,)), i + 1, hi)
            bitmap |= 1 << nibble
            ranges.append((i, end))
            i = end
        children = [
            leaf(keys[a], values[a], below) if b - a == 1 else node(a, b, below) for a, b in ranges
        ]
        refs = [
            compact(len(child)) + child
            if len(child) < 32
            else hash_ref + blake2b(child, digest_size=32).digest()
            for child in children
        ]
        return (
            node_header(kind, p - depth)
            + packed(first, depth, p)
            + bitmap.to_bytes(2, "little")
            + value_part
            + b"".join(refs)
        )

    return node


def common_nibbles(a: bytes, b: bytes) -> int:
    """Length, in nibbles, of the common prefix of ``a`` and ``b``.

    XOR of the two as integers finds the first differing bit without a Python-level loop.
    """
    width = min(len(a), len(b))
    diff = int.from_bytes(a[:width], "big") ^ int.from_bytes(b[:width], "big")
    return 2 * width if diff == 0 else (8 * width - diff.bit_length()) // 4


def check_state_version(state_version: int) -> None:
    if state_version not in (0, 1):
        raise InputError(f"state version must be 0 or 1, got {state_version!r}")


def trie_root(
    entries: Mapping[bytes, bytes] | Iterable[tuple[bytes, bytes]], state_version: int
) -> bytes:
    """Root of the trie holding ``entries`` (key bytes -> value bytes). Order does not matter."""
    check_state_version(state_version)
    mapping = entries if isinstance(entries, Mapping) else dict(entries)
    if not mapping:
        return EMPTY_TRIE_ROOT
    if len(mapping) >= BULK_MIN_KEYS:
        from ops_tools.chainspec.sorted_storage import sorted_storage
        from ops_tools.chainspec.trie_bulk import sorted_trie_root

        storage = sorted_storage(list(mapping), list(mapping.values()))
        if storage is not None:
            return sorted_trie_root(storage, state_version)
    keys = sorted(mapping)
    values = [mapping[k] for k in keys]
    return root_of(lambda: node_builder(keys, values, state_version)(0, len(keys), 0))


def root_of(encode_root: Callable[[], bytes]) -> bytes:
    """Blake2-256 of the root node that ``encode_root`` builds recursively."""
    try:
        return blake2_256(encode_root())
    except RecursionError:
        # Only a pathological key set (a long chain of keys each a prefix of the next) nests
        # this deep; build it again on a thread with room for it.
        return blake2_256(_deep(encode_root))


def _deep(fn: Callable[[], bytes]) -> bytes:
    result: list[bytes] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(fn())
        except BaseException as exc:  # re-raised on the caller's thread
            errors.append(exc)

    old_limit = sys.getrecursionlimit()
    old_stack = threading.stack_size()
    sys.setrecursionlimit(1_000_000)
    threading.stack_size(512 * 1024 * 1024)
    try:
        worker = threading.Thread(target=run)
        worker.start()
        worker.join()
    finally:
        threading.stack_size(old_stack)
        sys.setrecursionlimit(old_limit)
    if errors:
        raise errors[0]
    return result[0]


def ordered_trie_root(values: Iterable[bytes], state_version: int = 0) -> bytes:
    """Trie of ``compact(index) -> value``: Substrate's extrinsics root."""
    return trie_root({encode_compact(i): v for i, v in enumerate(values)}, state_version)

"""Substrate's base-16 Patricia-Merkle trie root (``sp-trie`` layouts V0 and V1).

Keys are handled as lowercase hex strings: one hex digit is one nibble, and the string order of
such strings is the byte order of the keys, so the trie is built by recursing over one sorted
list and finding each child's range by bisection. That keeps a million-entry genesis within a
few seconds in pure Python.

Node codec (``sp_trie::NodeCodec``), header first byte by node kind:
  leaf 0b01xxxxxx, branch without value 0b10xxxxxx, branch with value 0b11xxxxxx,
  leaf with hashed value 0b001xxxxx, branch with hashed value 0b0001xxxx,
where the x bits start the partial key's nibble count. State version 1 stores values of 33 bytes
or more as their Blake2-256 hash. A child whose encoding is shorter than 32 bytes is inlined in
its parent; the root is always hashed.
"""

from __future__ import annotations

import sys
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
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


def _partial(nibbles: str) -> bytes:
    # An odd nibble count puts the first nibble alone, in the low half of the first byte.
    return bytes.fromhex("0" + nibbles if len(nibbles) & 1 else nibbles)


class _Builder:
    def __init__(self, keys: list[str], values: Mapping[str, bytes], state_version: int):
        self.keys = keys
        self.values = values
        self.hash_values = state_version == 1

    def _value(self, value: bytes) -> tuple[bytes, bool]:
        if self.hash_values and len(value) >= V1_VALUE_HASH_THRESHOLD:
            return blake2_256(value), True
        return encode_compact(len(value)) + value, False

    def _leaf(self, key: str, depth: int) -> bytes:
        partial = key[depth:]
        value, hashed = self._value(self.values[key])
        header = node_header(_HASHED_VALUE_LEAF if hashed else _LEAF, len(partial))
        return header + _partial(partial) + value

    def node(self, lo: int, hi: int, depth: int) -> bytes:
        """Encoded node for the sorted key range [lo, hi) below ``depth`` nibbles."""
        keys = self.keys
        if hi - lo == 1:
            return self._leaf(keys[lo], depth)
        first, last = keys[lo], keys[hi - 1]
        # Sorted keys: the range's common prefix is that of its first and last key.
        p = depth
        limit = min(len(first), len(last))
        while p < limit and first[p] == last[p]:
            p += 1
        start = lo
        value_part = b""
        kind = _BRANCH_NO_VALUE
        if len(first) == p:
            # The first key ends where the branch is: it is the branch's value.
            value_part, hashed = self._value(self.values[first])
            kind = _HASHED_VALUE_BRANCH if hashed else _BRANCH_WITH_VALUE
            start = lo + 1
        bitmap = 0
        children: list[bytes] = []
        i = start
        while i < hi:
            nibble = keys[i][p]
            bound = keys[i][:p] + chr(ord(nibble) + 1)
            end = bisect_left(keys, bound, i + 1, hi)
            bitmap |= 1 << int(nibble, 16)
            child = self._leaf(keys[i], p + 1) if end - i == 1 else self.node(i, end, p + 1)
            if len(child) < 32:
                children.append(encode_compact(len(child)) + child)
            else:
                children.append(_HASH_REF_PREFIX + blake2_256(child))
            i = end
        return (
            node_header(kind, p - depth)
            + _partial(first[depth:p])
            + bitmap.to_bytes(2, "little")
            + value_part
            + b"".join(children)
        )


def _check_state_version(state_version: int) -> None:
    if state_version not in (0, 1):
        raise InputError(f"state version must be 0 or 1, got {state_version!r}")


def trie_root_hex(entries: Mapping[str, bytes], state_version: int) -> bytes:
    """Root of a trie whose keys are lowercase hex strings (no ``0x``) of even length."""
    _check_state_version(state_version)
    if not entries:
        return EMPTY_TRIE_ROOT
    keys = sorted(entries)
    builder = _Builder(keys, entries, state_version)
    try:
        return blake2_256(builder.node(0, len(keys), 0))
    except RecursionError:
        # Only a pathological key set (a long chain of keys each a prefix of the next) nests
        # this deep; build it again on a thread with room for it.
        return _deep(lambda: blake2_256(builder.node(0, len(keys), 0)))


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


def trie_root(entries: Mapping[bytes, bytes] | Iterable[tuple[bytes, bytes]], state_version: int) -> bytes:
    """Root of the trie holding ``entries`` (key bytes -> value bytes). Order does not matter."""
    items = entries.items() if isinstance(entries, Mapping) else entries
    hexed: dict[str, bytes] = {}
    for key, value in items:
        hexed[bytes(key).hex()] = bytes(value)
    return trie_root_hex(hexed, state_version)


def ordered_trie_root(values: Iterable[bytes], state_version: int = 0) -> bytes:
    """Trie of ``compact(index) -> value``: Substrate's extrinsics root."""
    return trie_root({encode_compact(i): v for i, v in enumerate(values)}, state_version)

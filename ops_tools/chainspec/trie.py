"""Substrate's base-16 Patricia-Merkle trie root (``sp-trie`` layouts V0 and V1).

Node codec (``sp_trie::NodeCodec``), header first byte by node kind:
  leaf 0b01xxxxxx, branch without value 0b10xxxxxx, branch with value 0b11xxxxxx,
  leaf with hashed value 0b001xxxxx, branch with hashed value 0b0001xxxx,
where the x bits start the partial key's nibble count. The partial key follows, packed two
nibbles a byte; an odd count puts the first nibble alone in the low half of the first byte.
State version 1 stores values of 33 bytes or more as their Blake2-256 hash. A child whose
encoding is shorter than 32 bytes is inlined in its parent; the root is always hashed.

Two builders compute the same nodes:
- the general one recurses over a sorted key list and finds each child's range by bisection;
- the bulk one (``_bulk_node``) handles a large run of sorted keys of one length (a genesis is
  mostly a few big storage maps: a million ``System.Account`` keys are all 80 bytes). With every
  key the same length, the trie's shape follows from the common prefix of neighbouring keys
  alone, so leaves and branches are encoded level by level with numpy, and only Blake2 runs once
  per node. A large run is split between two forked processes at its top branch.
The general builder hands every large same-length range it meets to the bulk one.
"""

from __future__ import annotations

import gc
import hashlib
import os
import pickle
import sys
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from itertools import compress
from typing import Any, Protocol

import numpy as np

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
_REF = 33  # a hashed child reference: compact(32) then the hash

# A same-length group needs this many keys to be worth numpy's fixed costs.
BULK_MIN_KEYS = 2048
# A range of one key length goes to the bulk builder from this many keys.
VECTOR_MIN_KEYS = 64
# From this many keys a bulk range is split between two processes.
PARALLEL_MIN_KEYS = 100_000

_blake2_256 = partial(hashlib.blake2b, digest_size=32)
_digest = hashlib.blake2b.digest


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


def _packed(key: bytes, start: int, end: int) -> bytes:
    """Nibbles ``start:end`` of ``key``, packed as a partial key (aligned to the end)."""
    if not (start | end) & 1:
        return key[start >> 1 : end >> 1]
    nibbles = key.hex()[start:end]
    return bytes.fromhex("0" + nibbles if len(nibbles) & 1 else nibbles)


def _hash_slices(buf: np.ndarray | bytes, starts: Iterable[int], ends: Iterable[int]) -> bytes:
    """Blake2-256 of each ``buf[start:end]``, concatenated; the loop runs in C (``map``)."""
    view = memoryview(buf).cast("B")
    return b"".join(map(_digest, map(_blake2_256, map(view.__getitem__, map(slice, starts, ends)))))


class ValueSource(Protocol):
    """The values of a sorted key run, decoded on demand (in the worker that needs them)."""

    def block(self, lo: int, hi: int) -> tuple[bytes, np.ndarray, np.ndarray]:
        """Values ``lo:hi`` in one buffer, with where each begins in it and its length."""
        ...

    def item(self, i: int) -> bytes: ...


class BytesValues:
    def __init__(self, values: Sequence[bytes]) -> None:
        self.values = values

    def block(self, lo: int, hi: int) -> tuple[bytes, np.ndarray, np.ndarray]:
        part = self.values[lo:hi]
        lengths = np.fromiter(map(len, part), np.int64, len(part))
        return b"".join(part), np.cumsum(lengths) - lengths, lengths

    def item(self, i: int) -> bytes:
        return self.values[i]


class RowValues:
    """Values of one size: row ``order[i]`` of a (N, size) array is the ``i``-th value."""

    def __init__(self, rows: np.ndarray, order: np.ndarray) -> None:
        self.rows, self.order = rows, order

    def block(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows = self.rows[self.order[lo:hi]]
        size = rows.shape[1]
        return rows.reshape(-1), np.arange(hi - lo) * size, np.full(hi - lo, size)

    def item(self, i: int) -> bytes:
        return self.rows[self.order[i]].tobytes()


class FlatValues:
    """Values cut out of one buffer: the ``i``-th is ``flat[begins[i]:begins[i] + sizes[i]]``."""

    def __init__(self, flat: bytes | np.ndarray, begins: np.ndarray, sizes: np.ndarray) -> None:
        self.flat, self.begins, self.sizes = flat, begins, sizes

    def block(self, lo: int, hi: int) -> tuple[bytes | np.ndarray, np.ndarray, np.ndarray]:
        return self.flat, self.begins[lo:hi], self.sizes[lo:hi]

    def item(self, i: int) -> bytes:
        begin = int(self.begins[i])
        return bytes(memoryview(self.flat).cast("B")[begin : begin + int(self.sizes[i])])


def _node_builder(
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
    packed = _packed
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
        # Sorted keys: the range's common prefix is that of its first and last key. XOR of the
        # two as integers finds the first differing bit without a Python-level loop.
        start_byte = depth >> 1
        width = min(len(first), len(last)) - start_byte
        diff = int.from_bytes(first[start_byte : start_byte + width], "big") ^ int.from_bytes(
            last[start_byte : start_byte + width], "big"
        )
        p = 2 * start_byte + (2 * width if diff == 0 else (8 * width - diff.bit_length()) // 4)
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


# --- The bulk builder: a sorted run of distinct keys of one length -------------------------------


class _InlineNode(Exception):
    """A leaf encodes to under 32 bytes (inlined in its parent); the bulk layout assumes none."""


def _common_nibbles(a: bytes, b: bytes) -> int:
    width = min(len(a), len(b))
    diff = int.from_bytes(a[:width], "big") ^ int.from_bytes(b[:width], "big")
    return 2 * width if diff == 0 else (8 * width - diff.bit_length()) // 4


class DuplicateKeyError(InputError):
    """Two keys of the input decode to the same bytes."""


def _duplicate(key: bytes) -> InputError:
    return DuplicateKeyError(
        f"storage key 0x{key.hex()} appears twice (hex keys are case-insensitive); keep one"
    )


def adjacent_lcp(keys: np.ndarray) -> np.ndarray:
    """Common prefix, in nibbles, of each pair of neighbouring rows of a sorted (N, L) array."""
    n, width = keys.shape
    out = np.empty(max(n - 1, 0), np.int64)
    if n < 2:
        return out
    # Columns shared by every row (a storage map's 32-byte prefix) need no comparison.
    skip = _common_nibbles(keys[0].tobytes(), keys[-1].tobytes()) // 2
    if skip == width:
        raise _duplicate(keys[0].tobytes())
    chunk = max(1, (1 << 22) // max(1, width - skip))
    for lo in range(0, n - 1, chunk):
        hi = min(n - 1, lo + chunk)
        x = keys[lo + 1 : hi + 1, skip:] ^ keys[lo:hi, skip:]
        nonzero = x != 0
        first = nonzero.argmax(axis=1)
        b = x[np.arange(hi - lo), first]
        if not b.all():
            raise _duplicate(keys[lo + int(np.flatnonzero(b == 0)[0])].tobytes())
        out[lo:hi] = 2 * (skip + first) + (b < 16)
    return out


def argsort_rows(keys: np.ndarray) -> np.ndarray:
    """The order that sorts the rows of an (N, L) uint8 array as byte strings."""
    n, width = keys.shape
    if n < 2:
        return np.arange(n)
    # Sort on 8-byte big-endian words from the first column that varies; only rows still tied
    # after one word are sorted again on the next (random hashes rarely get that far).
    # Row by row rather than column by column: a column of a row-major array is read as whole
    # cache lines anyway.
    same = np.ones(width, bool)
    step = max(1, (1 << 22) // width)
    for lo in range(0, n, step):
        same &= (keys[lo : lo + step] == keys[0]).all(axis=0)
    start = int(np.argmin(same)) if not same.all() else width
    if start == width:
        raise _duplicate(keys[0].tobytes())

    def word(col: int, rows: np.ndarray | None = None) -> np.ndarray:
        part = keys[:, col : col + 8] if rows is None else keys[rows, col : col + 8]
        if part.shape[1] < 8:
            part = np.pad(part, ((0, 0), (0, 8 - part.shape[1])))
        return np.ascontiguousarray(part).view(">u8").ravel().astype(np.uint64)

    first_word = word(start)
    # Any order among equal words will do: the next word sorts them.
    order = np.argsort(first_word)
    tied = np.diff(first_word[order]) == 0
    del first_word
    col = start + 8
    while tied.any() and col < width:
        pos = np.flatnonzero(np.concatenate((tied, [False])) | np.concatenate(([False], tied)))
        group = np.cumsum(np.concatenate(([True], ~tied)))[pos]
        rows = order[pos]
        next_word = word(col, rows)
        perm = np.lexsort((next_word, group))
        order[pos] = rows[perm]
        sorted_word = next_word[perm]
        # Still tied: tied before, and equal on this word too.
        still = np.zeros_like(tied)
        same = (group[perm][1:] == group[perm][:-1]) & (sorted_word[1:] == sorted_word[:-1])
        still[pos[:-1][same]] = True
        tied = still & tied
        col += 8
    return order


def _leaf_refs(
    keys: np.ndarray,
    flat: bytes,
    begins: np.ndarray,
    vlen: np.ndarray,
    lcp: np.ndarray,
    left: int,
    right: int,
    state_version: int,
    refs: np.ndarray,
) -> None:
    """Fill ``refs`` (N, 33) with the hashed references of the rows' leaves.

    Value ``i`` is ``flat[begins[i]:begins[i] + vlen[i]]``. A leaf's partial key starts one
    nibble past the longer of the common prefixes with its two neighbours; ``left``/``right``
    stand for the neighbours outside the run. Leaves are encoded in groups of one start and one
    value size, as rows of one array.
    """
    n, width = keys.shape
    ext = np.empty(n + 1, np.int64)
    ext[0], ext[-1] = left, right
    ext[1:-1] = lcp
    start = np.maximum(ext[:-1], ext[1:]) + 1
    ends = begins + vlen
    values = np.frombuffer(flat, np.uint8)
    hashed = (vlen >= V1_VALUE_HASH_THRESHOLD) if state_version == 1 else np.zeros(n, bool)
    value_hashes = None
    hash_row = None
    if hashed.any():
        value_hashes = np.frombuffer(
            _hash_slices(flat, begins[hashed].tolist(), ends[hashed].tolist()), np.uint8
        ).reshape(-1, 32)
        hash_row = np.cumsum(hashed) - 1
    value_class = np.where(hashed, -1, vlen)
    uniform = None
    if n and not hashed.all() and (vlen == vlen[0]).all():
        stride = int(begins[1] - begins[0]) if n > 1 else 0
        if (begins == begins[0] + stride * np.arange(n)).all():
            uniform = np.lib.stride_tricks.as_strided(
                values[int(begins[0]) :], shape=(n, int(vlen[0])), strides=(stride, 1)
            )
    span = int(value_class.max()) + 2
    group_key = start * span + (value_class + 1)
    uniq, inverse = np.unique(group_key, return_inverse=True)
    by_group = np.argsort(inverse, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(inverse, minlength=len(uniq)))))
    for g, key in enumerate(uniq.tolist()):
        idx = by_group[bounds[g] : bounds[g + 1]]
        s, vclass = divmod(key, span)
        vclass -= 1
        m = len(idx)
        first_byte = s >> 1
        if vclass < 0:
            header = node_header(_HASHED_VALUE_LEAF, 2 * width - s)
            tail = 32
        else:
            header = node_header(_LEAF, 2 * width - s)
            size = encode_compact(vclass)
            tail = len(size) + vclass
        h = len(header)
        body = width - first_byte
        total = h + body + tail
        if total < 32:
            raise _InlineNode
        enc = np.empty((m, total), np.uint8)
        enc[:, :h] = np.frombuffer(header, np.uint8)
        enc[:, h : h + body] = keys[idx, first_byte:]
        if s & 1:
            enc[:, h] &= 0x0F
        if vclass < 0:
            assert value_hashes is not None and hash_row is not None
            enc[:, h + body :] = value_hashes[hash_row[idx]]
        else:
            enc[:, h + body : h + body + len(size)] = np.frombuffer(size, np.uint8)
            if vclass:
                if uniform is not None:
                    rows = uniform[idx]
                    enc[:, h + body + len(size) :] = rows
                else:
                    # Gather in chunks: the index array is eight bytes per value byte.
                    step = max(1, (1 << 20) // vclass)
                    for c in range(0, m, step):
                        enc[c : c + step, h + body + len(size) :] = values[
                            begins[idx[c : c + step]][:, None] + np.arange(vclass)
                        ]
        digests = _hash_slices(enc, range(0, m * total, total), range(total, m * total + 1, total))
        refs[idx, 1:] = np.frombuffer(digests, np.uint8).reshape(m, 32)


# Leaves are encoded this many at a time, so their scratch arrays are reused memory.
_LEAF_CHUNK = 1 << 16


def _same_size_leaf_refs(
    keys: np.ndarray,
    flat: bytes | np.ndarray,
    begins: np.ndarray,
    vlen: np.ndarray,
    start: np.ndarray,
    state_version: int,
    refs: np.ndarray,
) -> bool:
    """``_leaf_refs`` for values all of one size, without grouping; False if they are not.

    Row ``i`` of one scratch array holds ``[room | key | value part]``; the leaf's header is
    written just before the byte where its partial key starts (over key bytes the leaf does not
    need), so every leaf is one slice of the array, whatever its partial key's length.
    """
    m, width = keys.shape
    if not m or not (vlen == vlen[0]).all():
        return False
    size = int(vlen[0])
    values = np.frombuffer(flat, np.uint8)
    hashed = state_version == 1 and size >= V1_VALUE_HASH_THRESHOLD
    if hashed:
        tail = np.frombuffer(
            _hash_slices(flat, begins.tolist(), (begins + size).tolist()), np.uint8
        ).reshape(m, 32)
        kind = _HASHED_VALUE_LEAF
    else:
        stride = int(begins[1] - begins[0]) if m > 1 else 0
        if not (begins == begins[0] + stride * np.arange(m)).all():
            return False
        rows = np.lib.stride_tricks.as_strided(
            values[int(begins[0]) :], shape=(m, size), strides=(stride, 1)
        )
        prefix = np.frombuffer(encode_compact(size), np.uint8)
        kind = _LEAF
    nibbles = 2 * width - start
    low = int(nibbles.min())
    headers = [node_header(kind, k) for k in range(low, int(nibbles.max()) + 1)]
    room = max(map(len, headers))
    header_len = np.array([len(h) for h in headers], np.int64)[nibbles - low]
    header_bytes = np.zeros((len(headers), room), np.uint8)
    for k, h in enumerate(headers):
        header_bytes[k, : len(h)] = np.frombuffer(h, np.uint8)
    value_part = 32 if hashed else len(prefix) + size
    row = room + width + value_part
    scratch = np.empty((m, row), np.uint8)
    scratch[:, room : room + width] = keys
    if hashed:
        scratch[:, room + width :] = tail
    else:
        scratch[:, room + width : room + width + len(prefix)] = prefix
        scratch[:, room + width + len(prefix) :] = rows
    first = start >> 1
    odd = np.flatnonzero(start & 1)
    scratch[odd, room + first[odd]] &= 0x0F
    begin = room + first - header_len
    all_rows = np.arange(m)
    for j in range(room):
        sel = np.flatnonzero(header_len > j)
        scratch[sel, begin[sel] + j] = header_bytes[nibbles[sel] - low, j]
    if int((row - begin).min()) < 32:
        raise _InlineNode
    offsets = all_rows * row
    digests = _hash_slices(scratch, (offsets + begin).tolist(), (offsets + row).tolist())
    refs[:, 1:] = np.frombuffer(digests, np.uint8).reshape(m, 32)
    return True


def _merge_levels(
    keys: np.ndarray, refs: np.ndarray, lcp: np.ndarray, left: int, right: int, stop: int
) -> np.ndarray:
    """Build every branch deeper than ``stop`` nibbles; returns the rows of the nodes left over.

    Nodes are kept in key order, each named by its first key's row (where its reference lives in
    ``refs``), with the common prefix between neighbours in ``gaps``. Deepest first, each run of
    neighbours whose common prefix is exactly ``p`` becomes one branch at ``p``: its children's
    references are consecutive rows, so all branches of a level are encoded by one ``np.insert``
    of their headers and bitmaps among the gathered references, and hashed in one ``map``.
    """
    alive = np.arange(len(keys))
    gaps = lcp
    levels = np.unique(gaps)
    for p in levels[levels > stop][::-1].tolist():
        n = len(alive)
        merge = gaps == p
        edges = np.diff(np.concatenate(([0], merge.view(np.int8), [0])))
        run_first = np.flatnonzero(edges == 1)
        run_last = np.flatnonzero(edges == -1)
        counts = run_last - run_first + 1
        runs = len(run_first)
        outer = np.empty(n + 1, np.int64)
        outer[0], outer[-1] = left, right
        outer[1:-1] = gaps
        parent = np.maximum(outer[run_first], outer[run_last + 1])
        extra = p - 1 - parent  # partial-key nibbles between the parent branch and this one
        cover = np.zeros(n + 1, np.int64)
        cover[run_first] += 1
        cover[run_last + 1] -= 1
        in_run = np.cumsum(cover[:n]) > 0
        members = alive[in_run]
        run_start = np.concatenate(([0], np.cumsum(counts)[:-1]))
        column = keys[members, p >> 1]
        nibble = (column & 15) if p & 1 else (column >> 4)
        bitmap = np.bitwise_or.reduceat(np.left_shift(1, nibble.astype(np.int64)), run_start)
        head_len = np.ones(runs, np.int64)
        heads: dict[int, bytes] = {}
        for r in np.flatnonzero(extra).tolist():
            head = node_header(_BRANCH_NO_VALUE, int(extra[r])) + _packed(
                keys[alive[run_first[r]]].tobytes(), int(parent[r]) + 1, p
            )
            heads[r] = head
            head_len[r] = len(head)
        # Each branch is its header, partial key and bitmap, then its children's references,
        # which are consecutive rows: insert the former before the latter in one call.
        prefix_len = head_len + 2
        prefix_at = np.concatenate(([0], np.cumsum(prefix_len)[:-1]))
        prefix = np.empty(int(prefix_len.sum()), np.uint8)
        prefix[prefix_at] = _BRANCH_NO_VALUE[0]
        for r, head in heads.items():
            prefix[prefix_at[r] : prefix_at[r] + len(head)] = np.frombuffer(head, np.uint8)
        prefix[prefix_at + head_len] = bitmap & 255
        prefix[prefix_at + head_len + 1] = bitmap >> 8
        out = np.insert(refs[members].reshape(-1), np.repeat(_REF * run_start, prefix_len), prefix)
        offset = prefix_at + _REF * run_start
        size = prefix_len + _REF * counts
        digests = _hash_slices(out, offset.tolist(), (offset + size).tolist())
        refs[alive[run_first], 1:] = np.frombuffer(digests, np.uint8).reshape(runs, 32)
        keep = ~in_run
        keep[run_first] = True
        alive = alive[keep]
        gaps = gaps[~merge]
    return alive


def _children(
    keys: SortedRows,
    values: ValueSource,
    lo: int,
    hi: int,
    left: int,
    right: int,
    stop: int,
    state_version: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Rows and references of the nodes hanging below depth ``stop`` in rows ``lo:hi``."""
    part = keys.take(lo, hi)
    lcp = adjacent_lcp(part)
    refs = np.empty((hi - lo, _REF), np.uint8)
    refs[:, 0] = _HASH_REF_PREFIX[0]
    ext = np.empty(hi - lo + 1, np.int64)
    ext[0], ext[-1] = left, right
    ext[1:-1] = lcp
    start = np.maximum(ext[:-1], ext[1:]) + 1
    for c in range(0, hi - lo, _LEAF_CHUNK):
        d = min(hi - lo, c + _LEAF_CHUNK)
        flat, begins, lengths = values.block(lo + c, lo + d)
        if not _same_size_leaf_refs(
            part[c:d], flat, begins, lengths, start[c:d], state_version, refs[c:d]
        ):
            _leaf_refs(
                part[c:d],
                flat,
                begins,
                lengths,
                lcp[c : d - 1],
                int(ext[c]),
                int(ext[d]),
                state_version,
                refs[c:d],
            )
    alive = _merge_levels(part, refs, lcp, left, right, stop)
    return alive + lo, refs[alive]


def _bulk_node(
    keys: SortedRows, values: ValueSource, lo: int, hi: int, depth: int, state_version: int
) -> bytes:
    """The encoded branch over sorted distinct same-length rows ``lo:hi`` (two or more)."""
    first, last = keys.row(lo), keys.row(hi - 1)
    p = _common_nibbles(first, last)
    if p == 2 * len(first):
        raise _duplicate(first)
    split = None
    if hi - lo >= PARALLEL_MIN_KEYS and can_fork():
        # Split at a child boundary of this branch, as close to the middle as possible.
        column = keys.column(slice(lo, hi), p >> 1)
        nibble = (column & 15) if p & 1 else (column >> 4)
        mid = (hi - lo) // 2
        cuts = [int(np.searchsorted(nibble, nibble[mid], side)) for side in ("left", "right")]
        cuts = [c for c in cuts if 0 < c < hi - lo]
        split = lo + min(cuts, key=lambda c: abs(c - mid))
    if split is None:
        rows, refs = _children(keys, values, lo, hi, depth - 1, depth - 1, p, state_version)
        row_parts, ref_parts = [rows], [refs]
    else:
        worker = run_forked(
            lambda: _children(keys, values, split, hi, p, depth - 1, p, state_version)
        )
        try:
            mine = _children(keys, values, lo, split, depth - 1, p, p, state_version)
        finally:
            theirs = collect(worker)  # waited for even when this half failed
        row_parts, ref_parts = [mine[0], theirs[0]], [mine[1], theirs[1]]
    rows = np.concatenate(row_parts)
    column = keys.column(rows, p >> 1)
    nibble = (column & 15) if p & 1 else (column >> 4)
    bitmap = int(np.bitwise_or.reduce(np.left_shift(1, nibble.astype(np.int64))))
    return (
        node_header(_BRANCH_NO_VALUE, p - depth)
        + _packed(first, depth, p)
        + bitmap.to_bytes(2, "little")
        + b"".join(r.tobytes() for r in ref_parts)
    )


def can_fork() -> bool:
    # Forking a process that runs other threads can leave their locks held in the child.
    return hasattr(os, "fork") and threading.active_count() == 1 and (os.cpu_count() or 1) > 1


def run_forked(job: Callable[[], object]) -> tuple[int, int]:
    """Run ``job`` in a forked child that inherits the arrays; its result comes back pickled."""
    read_fd, write_fd = os.pipe()
    gc.freeze()  # the child's collector then leaves the parent's objects (and their pages) alone
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        os.close(read_fd)
        status = 0
        try:
            try:
                payload = pickle.dumps((True, job()), protocol=pickle.HIGHEST_PROTOCOL)
            except BaseException as exc:  # sent to the parent, which raises it
                try:
                    payload = pickle.dumps((False, exc))
                except Exception:
                    payload = pickle.dumps((False, RuntimeError(repr(exc))))
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(payload)
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(write_fd)
    gc.unfreeze()
    return pid, read_fd


def collect(worker: tuple[int, int]) -> Any:
    pid, read_fd = worker
    with os.fdopen(read_fd, "rb") as pipe:
        payload = pipe.read()
    _, status = os.waitpid(pid, 0)
    if not payload:
        raise RuntimeError(f"trie worker {pid} died (wait status {status})")
    ok, result = pickle.loads(payload)  # noqa: S301 - written by our own forked child
    if not ok:
        raise result
    return result


# --- Sorted input: one big same-length run ("bulk") interleaved with other keys -------------------


class SortedRows:
    """The rows of an (N, L) key array in the order ``order`` (sorted), gathered on demand.

    Gathering a million sorted rows is left to the worker that encodes them, half each.
    """

    def __init__(self, rows: np.ndarray, order: np.ndarray) -> None:
        self.rows, self.order = rows, order
        self.shape = rows.shape

    def __len__(self) -> int:
        return len(self.rows)

    def row(self, i: int) -> bytes:
        return self.rows[self.order[i]].tobytes()

    def take(self, lo: int, hi: int) -> np.ndarray:
        return self.rows[self.order[lo:hi]]

    def column(self, rows: np.ndarray | slice, col: int) -> np.ndarray:
        return self.rows[self.order[rows], col]


@dataclass
class SortedStorage:
    """A storage map in key order, split into a bulk run of one key length and the rest.

    ``bulk_keys`` holds the sorted distinct keys of one length L, whose values come from
    ``bulk_values`` (same order); ``other_keys``/``other_values`` are the remaining keys, sorted,
    and ``other_pos`` their positions in the merged order.
    """

    bulk_keys: SortedRows
    bulk_values: ValueSource
    other_keys: list[bytes]
    other_values: list[bytes]
    other_pos: list[int]

    def __len__(self) -> int:
        return len(self.bulk_keys) + len(self.other_keys)

    def get(self, key: bytes) -> bytes | None:
        if len(key) == self.bulk_keys.shape[1]:
            i = bisect_left(_Rows(self.bulk_keys), key)
            if i < len(self.bulk_keys) and self.bulk_keys.row(i) == key:
                return self.bulk_values.item(i)
            return None
        j = bisect_left(self.other_keys, key)
        if j < len(self.other_keys) and self.other_keys[j] == key:
            return self.other_values[j]
        return None

    def with_others(self, extra: Mapping[bytes, bytes]) -> SortedStorage:
        """A copy with ``extra`` keys (none of the bulk length, none present) added."""
        merged = dict(zip(self.other_keys, self.other_values, strict=True))
        merged.update(extra)
        keys = sorted(merged)
        return SortedStorage(
            self.bulk_keys,
            self.bulk_values,
            keys,
            [merged[k] for k in keys],
            merge_positions(self.bulk_keys, keys),
        )


def merge_positions(bulk_keys: SortedRows, others: list[bytes]) -> list[int]:
    """Positions of the sorted ``others`` in the merged order of ``others`` and the bulk rows."""
    rows = _Rows(bulk_keys)
    out = []
    lo = 0
    for j, key in enumerate(others):
        lo = bisect_left(rows, key, lo)
        out.append(lo + j)
    return out


class _Rows:
    """Sorted rows as a read-only sequence of bytes (for ``bisect``)."""

    def __init__(self, keys: SortedRows) -> None:
        self.keys = keys

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: int) -> bytes:
        return self.keys.row(i)


class _Merged:
    """The merged sorted order of a ``SortedStorage`` as one sequence (keys or values)."""

    def __init__(
        self, bulk: Callable[[int], bytes], others: list[bytes], pos: list[int], n: int
    ) -> None:
        self.bulk, self.others, self.pos, self.n = bulk, others, pos, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> bytes:
        j = bisect_left(self.pos, i)
        if j < len(self.pos) and self.pos[j] == i:
            return self.others[j]
        return self.bulk(i - j)


def sorted_storage(keys: list[bytes], values: list[bytes]) -> SortedStorage | None:
    """Split distinct ``keys`` (any order) into a bulk run and the rest; None if no run is big."""
    lengths = np.fromiter(map(len, keys), np.int64, len(keys))
    if len(keys) < BULK_MIN_KEYS:
        return None
    common = int(np.bincount(lengths).argmax())
    is_bulk = lengths == common
    if int(is_bulk.sum()) < BULK_MIN_KEYS or common == 0:
        return None
    bulk_list = list(compress(keys, is_bulk.tolist()))
    unsorted = np.frombuffer(b"".join(bulk_list), np.uint8).reshape(-1, common)
    order = argsort_rows(unsorted)
    bulk_keys = SortedRows(unsorted, order)
    bulk_values = [values[i] for i in np.flatnonzero(is_bulk)[order].tolist()]
    rest = sorted((k, v) for k, v, b in zip(keys, values, is_bulk.tolist(), strict=True) if not b)
    other_keys = [k for k, _ in rest]
    return SortedStorage(
        bulk_keys,
        BytesValues(bulk_values),
        other_keys,
        [v for _, v in rest],
        merge_positions(bulk_keys, other_keys),
    )


def _sorted_root_node(storage: SortedStorage, state_version: int) -> bytes:
    bulk_keys, bulk_values = storage.bulk_keys, storage.bulk_values
    others, pos = storage.other_keys, storage.other_pos
    other_node = _node_builder(others, storage.other_values, state_version)

    def bulk_range(r0: int, r1: int, depth: int) -> bytes:
        if r1 - r0 >= VECTOR_MIN_KEYS:
            try:
                return _bulk_node(bulk_keys, bulk_values, r0, r1, depth, state_version)
            except _InlineNode:
                pass  # small values: some leaves are inlined, which the general builder handles
        keys = [bulk_keys.row(r) for r in range(r0, r1)]
        flat, begins, lengths = bulk_values.block(r0, r1)
        view = memoryview(flat).cast("B")
        values = [
            bytes(view[a:b])
            for a, b in zip(begins.tolist(), (begins + lengths).tolist(), strict=True)
        ]
        return _node_builder(keys, values, state_version)(0, r1 - r0, depth)

    def delegate(lo: int, hi: int, depth: int) -> bytes | None:
        o_lo = bisect_left(pos, lo)
        o_hi = bisect_left(pos, hi, o_lo)
        if o_lo == o_hi:
            return bulk_range(lo - o_lo, hi - o_lo, depth)
        if o_hi - o_lo == hi - lo:
            return other_node(o_lo, o_hi, depth)
        return None

    n = len(storage)
    keys = _Merged(bulk_keys.row, others, pos, n)
    values = _Merged(bulk_values.item, storage.other_values, pos, n)
    return _node_builder(keys, values, state_version, delegate)(0, n, 0)


def sorted_trie_root(storage: SortedStorage, state_version: int) -> bytes:
    """Root of the trie holding a ``SortedStorage``."""
    _check_state_version(state_version)
    if not len(storage):
        return EMPTY_TRIE_ROOT
    try:
        return blake2_256(_sorted_root_node(storage, state_version))
    except RecursionError:
        return _deep(lambda: blake2_256(_sorted_root_node(storage, state_version)))


def _check_state_version(state_version: int) -> None:
    if state_version not in (0, 1):
        raise InputError(f"state version must be 0 or 1, got {state_version!r}")


def trie_root(
    entries: Mapping[bytes, bytes] | Iterable[tuple[bytes, bytes]], state_version: int
) -> bytes:
    """Root of the trie holding ``entries`` (key bytes -> value bytes). Order does not matter."""
    _check_state_version(state_version)
    mapping = entries if isinstance(entries, Mapping) else dict(entries)
    if not mapping:
        return EMPTY_TRIE_ROOT
    storage = sorted_storage(list(mapping), list(mapping.values()))
    if storage is not None:
        return sorted_trie_root(storage, state_version)
    keys = sorted(mapping)
    values = [mapping[k] for k in keys]
    try:
        return blake2_256(_node_builder(keys, values, state_version)(0, len(keys), 0))
    except RecursionError:
        # Only a pathological key set (a long chain of keys each a prefix of the next) nests
        # this deep; build it again on a thread with room for it.
        return _deep(
            lambda: blake2_256(_node_builder(keys, values, state_version)(0, len(keys), 0))
        )


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

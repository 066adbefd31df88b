"""The trie root of a ``SortedStorage``: its big run of same-length keys built level by level.

With every key of a run the same length, the trie's shape follows from the common prefix of
neighbouring keys alone, so leaves and branches are encoded a whole level at a time with numpy,
and only Blake2 runs once per node. A large run is split between two forked processes at its
top branch. The general builder (``trie.node_builder``) walks the merged key order and hands
each large range of the run to ``_bulk_node``. Node layouts: see ``trie``.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Callable, Iterable
from functools import partial
from typing import NamedTuple

import numpy as np

from ops_tools.chainspec import forked
from ops_tools.chainspec.scale import encode_compact
from ops_tools.chainspec.sorted_storage import SortedRows, SortedStorage, ValueSource
from ops_tools.chainspec.trie import (
    _BRANCH_NO_VALUE,
    _HASH_REF_PREFIX,
    _HASHED_VALUE_LEAF,
    _LEAF,
    EMPTY_TRIE_ROOT,
    V1_VALUE_HASH_THRESHOLD,
    check_state_version,
    common_nibbles,
    duplicate_key,
    node_builder,
    node_header,
    packed_nibbles,
    root_of,
)

# A range of the run goes to the bulk builder from this many keys.
VECTOR_MIN_KEYS = 64
# From this many keys a range is split between two processes.
PARALLEL_MIN_KEYS = 100_000
# Leaves are encoded this many at a time, so their scratch arrays are reused memory.
_LEAF_CHUNK = 1 << 16

_REF = 33  # a hashed child reference: compact(32) then the hash

_blake2_256 = partial(hashlib.blake2b, digest_size=32)
_digest = hashlib.blake2b.digest


class _InlineNode(Exception):
    """A leaf encodes to under 32 bytes (inlined in its parent); the bulk layout assumes none."""


def _hash_slices(buf: np.ndarray | bytes, starts: Iterable[int], ends: Iterable[int]) -> bytes:
    """Blake2-256 of each ``buf[start:end]``, concatenated; the loop runs in C (``map``)."""
    view = memoryview(buf).cast("B")
    return b"".join(map(_digest, map(_blake2_256, map(view.__getitem__, map(slice, starts, ends)))))


def adjacent_lcp(keys: np.ndarray) -> np.ndarray:
    """Common prefix, in nibbles, of each pair of neighbouring rows of a sorted (N, L) array."""
    n, width = keys.shape
    out = np.empty(max(n - 1, 0), np.int64)
    if n < 2:
        return out
    # Columns shared by every row (a storage map's 32-byte prefix) need no comparison.
    skip = common_nibbles(keys[0].tobytes(), keys[-1].tobytes()) // 2
    if skip == width:
        raise duplicate_key(keys[0].tobytes())
    chunk = max(1, (1 << 22) // max(1, width - skip))
    for lo in range(0, n - 1, chunk):
        hi = min(n - 1, lo + chunk)
        x = keys[lo + 1 : hi + 1, skip:] ^ keys[lo:hi, skip:]
        nonzero = x != 0
        first = nonzero.argmax(axis=1)
        b = x[np.arange(hi - lo), first]
        if not b.all():
            raise duplicate_key(keys[lo + int(np.flatnonzero(b == 0)[0])].tobytes())
        out[lo:hi] = 2 * (skip + first) + (b < 16)
    return out


class _Leaves(NamedTuple):
    """Leaves to encode: key rows; value ``i`` is ``flat[begins[i]:begins[i] + vlen[i]]``, and
    leaf ``i``'s partial key starts at nibble ``start[i]``."""

    keys: np.ndarray
    flat: bytes | np.ndarray
    begins: np.ndarray
    vlen: np.ndarray
    start: np.ndarray


def _leaf_refs(leaves: _Leaves, state_version: int, refs: np.ndarray) -> None:
    """Fill ``refs`` (N, 33) with the hashed references of the leaves.

    Leaves are encoded in groups of one start and one value size, as rows of one array.
    """
    keys, flat, begins, vlen, start = leaves
    n, width = keys.shape
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
            # Gather in chunks: the index array is eight bytes per value byte.
            step = max(1, (1 << 20) // max(1, vclass))
            for c in range(0, m, step) if vclass else ():
                enc[c : c + step, h + body + len(size) :] = values[
                    begins[idx[c : c + step]][:, None] + np.arange(vclass)
                ]
        digests = _hash_slices(enc, range(0, m * total, total), range(total, m * total + 1, total))
        refs[idx, 1:] = np.frombuffer(digests, np.uint8).reshape(m, 32)


def _same_size_leaf_refs(leaves: _Leaves, state_version: int, refs: np.ndarray) -> bool:
    """``_leaf_refs`` for values all of one size, without grouping; False if they are not.

    Row ``i`` of one scratch array holds ``[room | key | value part]``; the leaf's header is
    written just before the byte where its partial key starts (over key bytes the leaf does not
    need), so every leaf is one slice of the array, whatever its partial key's length.
    """
    keys, flat, begins, vlen, start = leaves
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
    for j in range(room):
        sel = np.flatnonzero(header_len > j)
        scratch[sel, begin[sel] + j] = header_bytes[nibbles[sel] - low, j]
    if int((row - begin).min()) < 32:
        raise _InlineNode
    offsets = np.arange(m) * row
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
            head = node_header(_BRANCH_NO_VALUE, int(extra[r])) + packed_nibbles(
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
    # A leaf's partial key starts one nibble past the longer of its common prefixes with its two
    # neighbours; ``left``/``right`` stand for the neighbours outside the range.
    neighbours = np.empty(hi - lo + 1, np.int64)
    neighbours[0], neighbours[-1] = left, right
    neighbours[1:-1] = lcp
    start = np.maximum(neighbours[:-1], neighbours[1:]) + 1
    for c in range(0, hi - lo, _LEAF_CHUNK):
        d = min(hi - lo, c + _LEAF_CHUNK)
        leaves = _Leaves(part[c:d], *values.block(lo + c, lo + d), start[c:d])
        if not _same_size_leaf_refs(leaves, state_version, refs[c:d]):
            _leaf_refs(leaves, state_version, refs[c:d])
    alive = _merge_levels(part, refs, lcp, left, right, stop)
    return alive + lo, refs[alive]


def _bulk_node(
    keys: SortedRows, values: ValueSource, lo: int, hi: int, depth: int, state_version: int
) -> bytes:
    """The encoded branch over sorted distinct same-length rows ``lo:hi`` (two or more)."""
    first, last = keys.row(lo), keys.row(hi - 1)
    p = common_nibbles(first, last)
    if p == 2 * len(first):
        raise duplicate_key(first)
    split = None
    if hi - lo >= PARALLEL_MIN_KEYS and forked.can_fork():
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
        worker = forked.run_forked(
            lambda: _children(keys, values, split, hi, p, depth - 1, p, state_version)
        )
        try:
            mine = _children(keys, values, lo, split, depth - 1, p, p, state_version)
        finally:
            theirs = forked.collect(worker)  # waited for even when this half failed
        row_parts, ref_parts = [mine[0], theirs[0]], [mine[1], theirs[1]]
    rows = np.concatenate(row_parts)
    column = keys.column(rows, p >> 1)
    nibble = (column & 15) if p & 1 else (column >> 4)
    bitmap = int(np.bitwise_or.reduce(np.left_shift(1, nibble.astype(np.int64))))
    return (
        node_header(_BRANCH_NO_VALUE, p - depth)
        + packed_nibbles(first, depth, p)
        + bitmap.to_bytes(2, "little")
        + b"".join(r.tobytes() for r in ref_parts)
    )


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


def _sorted_root_node(storage: SortedStorage, state_version: int) -> bytes:
    bulk_keys, bulk_values = storage.bulk_keys, storage.bulk_values
    others, pos = storage.other_keys, storage.other_pos
    other_node = node_builder(others, storage.other_values, state_version)

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
        return node_builder(keys, values, state_version)(0, r1 - r0, depth)

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
    return node_builder(keys, values, state_version, delegate)(0, n, 0)


def sorted_trie_root(storage: SortedStorage, state_version: int) -> bytes:
    """Root of the trie holding a ``SortedStorage``."""
    check_state_version(state_version)
    if not len(storage):
        return EMPTY_TRIE_ROOT
    return root_of(lambda: _sorted_root_node(storage, state_version))

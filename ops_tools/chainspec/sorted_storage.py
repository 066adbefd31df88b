"""A storage map in key order, held as numpy arrays: one big run of keys of one length (a
genesis's large storage maps: a million ``System.Account`` keys are all 80 bytes) and the rest.

Imported only for large maps (it loads numpy); ``trie_bulk`` computes the root of one.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import compress
from typing import Protocol

import numpy as np

from ops_tools.chainspec import trie
from ops_tools.chainspec.trie import duplicate_key


class ValueSource(Protocol):
    """The values of a sorted key run, decoded on demand (in the worker that needs them)."""

    def block(self, lo: int, hi: int) -> tuple[bytes | np.ndarray, np.ndarray, np.ndarray]:
        """Values ``lo:hi`` in one buffer, with where each begins in it and its length."""
        ...

    def item(self, i: int) -> bytes: ...


class BytesValues:
    """Values held as Python bytes, in key order (those of a map given as a dict)."""

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

    @classmethod
    def build(
        cls, bulk_keys: SortedRows, bulk_values: ValueSource, others: Mapping[bytes, bytes]
    ) -> SortedStorage:
        """The storage of a sorted bulk run and ``others`` (no key of the bulk length)."""
        keys = sorted(others)
        return cls(
            bulk_keys,
            bulk_values,
            keys,
            [others[k] for k in keys],
            merge_positions(bulk_keys, keys),
        )

    def with_others(self, extra: Mapping[bytes, bytes]) -> SortedStorage:
        """A copy with ``extra`` keys (none of the bulk length, none present) added."""
        merged = dict(zip(self.other_keys, self.other_values, strict=True))
        merged.update(extra)
        return SortedStorage.build(self.bulk_keys, self.bulk_values, merged)


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
        raise duplicate_key(keys[0].tobytes())

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


def sorted_storage(keys: list[bytes], values: list[bytes]) -> SortedStorage | None:
    """Split distinct ``keys`` (any order) into a bulk run and the rest; None if no run is big."""
    if len(keys) < trie.BULK_MIN_KEYS:
        return None
    lengths = np.fromiter(map(len, keys), np.int64, len(keys))
    common = int(np.bincount(lengths).argmax())
    is_bulk = lengths == common
    if int(is_bulk.sum()) < trie.BULK_MIN_KEYS or common == 0:
        return None
    bulk_list = list(compress(keys, is_bulk.tolist()))
    unsorted = np.frombuffer(b"".join(bulk_list), np.uint8).reshape(-1, common)
    order = argsort_rows(unsorted)
    bulk_keys = SortedRows(unsorted, order)
    bulk_values = [values[i] for i in np.flatnonzero(is_bulk)[order].tolist()]
    others = {k: v for k, v, b in zip(keys, values, is_bulk.tolist(), strict=True) if not b}
    return SortedStorage.build(bulk_keys, BytesValues(bulk_values), others)

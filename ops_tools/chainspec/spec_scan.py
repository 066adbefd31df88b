"""A large raw storage map read in bulk: hex decoded a few calls at a time, keys sorted by numpy.

A genesis of a million entries spends more time creating two million JSON strings than anything
else. ``scan_raw_spec`` finds ``genesis.raw.top`` in the file's bytes and decodes it without
them; ``sorted_hex_storage`` does the same for a map already parsed. Both give a
``SortedStorage`` for ``trie_bulk``, or None whenever anything is unusual, and the caller's
general path (``spec.hex_storage``) then names the offending entry.

Imported only for large specs: it loads numpy.
"""

from __future__ import annotations

import binascii
import itertools
import mmap
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ops_tools.chainspec import forked, trie
from ops_tools.chainspec.sorted_storage import (
    FlatValues,
    RowValues,
    SortedRows,
    SortedStorage,
    ValueSource,
    argsort_rows,
)
from ops_tools.chainspec.spec import LoadedSpec, decode_hex
from ops_tools.errors import InputError

# Strings in a text: the text, and an (N, 2) array of each one's [begin, end) offsets in it.
Strings = tuple[bytes, np.ndarray]


@dataclass(frozen=True)
class ScannedSpec:
    """A raw spec whose ``genesis.raw.top`` was read straight from the file's bytes.

    ``spec.data`` holds everything else; its ``genesis.raw.top`` is a placeholder.
    """

    spec: LoadedSpec
    top: SortedStorage


def scan_raw_spec(path: Path, raw: bytes) -> ScannedSpec | None:
    """The spec with its top storage map decoded from the bytes, or None to parse it normally.

    Finds the top map in the bytes, checks that it is a flat object of
    plain strings laid out with one separator pattern (compact, or pretty-printed as
    ``build-spec`` does), and decodes its hex in a few bulk calls. The rest of the document is
    parsed by orjson with the map replaced by a placeholder that only the real
    ``genesis.raw.top`` can match, so the JSON is checked as strictly as before. Anything
    unexpected (escapes, other layouts, non-hex, no dominant key length) returns None.
    """
    # Another "top" key may come first (in properties, say). The real map is most of the file,
    # so a small candidate is passed over without the cost of checking it.
    at = raw.find(b'"top"')
    while True:
        if at < 0:
            return None
        start = _map_start(raw, at + 5)
        scanned = None if start is None else _scan_map(raw, start, len(raw) // 2)
        if scanned is not None:
            end, quotes = scanned
            data = _skeleton(raw, start, end)
            if data is not None:
                break
        at = raw.find(b'"top"', at + 5)
    spans = _string_spans(raw, start, end, quotes)
    if spans is None:
        return None
    storage = _sorted_spans((raw, spans[0]), (raw, spans[1]))
    if storage is None:
        return None
    data["genesis"]["raw"]["top"] = {}
    return ScannedSpec(LoadedSpec(path, raw, data), storage)


def _skeleton(raw: bytes, start: int, end: int) -> dict[str, Any] | None:
    """The document with ``raw[start:end]`` replaced, if that was ``genesis.raw.top``'s value.

    The placeholder is random, so only the map that orjson would have kept can produce it.
    """
    marker = f"ops-tools-placeholder-{os.urandom(8).hex()}"
    try:
        data = orjson.loads(raw[:start] + b'{"' + marker.encode() + b'":0}' + raw[end:])
        top = data["genesis"]["raw"]["top"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    return data if top == {marker: 0} else None


def _map_start(raw: bytes, i: int) -> int | None:
    """Where the object after ``"top"`` (which ends at ``i``) starts, if ``:`` and ``{`` follow."""
    while raw[i : i + 1] in _JSON_SPACE:
        i += 1
    if raw[i : i + 1] != b":":
        return None
    i += 1
    while raw[i : i + 1] in _JSON_SPACE:
        i += 1
    return i if raw[i : i + 1] == b"{" else None


def _scan_map(raw: bytes, start: int, at_least: int) -> tuple[int, np.ndarray] | None:
    """End of the flat map opening at ``start``, and its quotes (offsets from ``start``).

    One pass, in cache-sized chunks: hex strings hold no brace, so the first ``}`` ends a flat
    map of them (whatever else it might be fails the later checks); a backslash (an escape)
    or a map shorter than ``at_least`` bytes returns None.
    """
    chars = np.frombuffer(raw, np.uint8)
    chunk = 1 << 18
    quotes = []
    for lo in range(start, len(chars), chunk):
        part = chars[lo : lo + chunk]
        closing = np.flatnonzero(part == ord("}"))
        if len(closing):
            part = part[: closing[0]]
        if (part == ord("\\")).any():
            return None
        quotes.append(np.flatnonzero(part == ord('"')) + (lo - start))
        if len(closing):
            end = lo + int(closing[0]) + 1
            return (end, np.concatenate(quotes)) if end - start >= at_least else None
    return None


_JSON_SPACE = (b" ", b"\t", b"\n", b"\r")


def _string_spans(
    raw: bytes, start: int, end: int, quotes: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """Begin/end offsets of the key and value strings of the flat object ``raw[start:end]``.

    ``quotes`` are the offsets of its ``"`` from ``start``. Returns (keys, values), each an
    (N, 2) array of [begin, end) offsets of the string contents in ``raw``. Every gap after a
    key must be the same bytes (``:`` with spaces), every gap after a value the same bytes
    (``,`` with spaces), so a few vectorised comparisons check the syntax.
    """
    chars = np.frombuffer(raw, np.uint8, end - start, start)
    if len(quotes) < 8 or len(quotes) % 4:
        return None
    head = bytes(chars[1 : quotes[0]])
    tail = bytes(chars[quotes[-1] + 1 : -1])
    if head.strip(b" \t\r\n") or tail.strip(b" \t\r\n"):
        return None
    closes, opens = quotes[1:-1:2], quotes[2::2]
    for parity, sep in ((0, b":"), (1, b",")):
        gap_from, gap_to = closes[parity::2] + 1, opens[parity::2]
        width = gap_to - gap_from
        pattern = bytes(chars[gap_from[0] : gap_to[0]])
        if not (width == len(pattern)).all() or pattern.strip(b" \t\r\n") != sep:
            return None
        for k, byte in enumerate(pattern):
            if not (chars[gap_from + k] == byte).all():
                return None
    # Rows of (key open, key close, value open, value close) quotes; contents start past "open".
    spans = quotes.reshape(-1, 4) + np.array([start + 1, start, start + 1, start])
    return spans[:, 0:2], spans[:, 2:4]


def sorted_hex_storage(entries: object) -> SortedStorage | None:
    """A large parsed storage map (``{"0xkey": "0xvalue"}``) in key order, or None.

    Its strings are joined into one text and read as a scanned file's are.
    """
    if not isinstance(entries, dict) or len(entries) < trie.BULK_MIN_KEYS:
        return None
    keys = _joined(list(entries))
    values = None if keys is None else _joined(list(entries.values()))
    return None if keys is None or values is None else _sorted_spans(keys, values)


def _joined(texts: list[Any]) -> Strings | None:
    """ASCII ``texts`` as one text with the span of each; None if one is not such a string."""
    try:
        lengths = np.fromiter(map(len, texts), np.int64, len(texts))
        # The str is dropped as soon as it is encoded: only one copy of the text outlives this.
        text = "".join(texts).encode("ascii")
    except (TypeError, UnicodeEncodeError):
        return None
    ends = np.cumsum(lengths)
    return text, np.stack((ends - lengths, ends), axis=1)


def _sorted_spans(key_strings: Strings, value_strings: Strings) -> SortedStorage | None:
    """``SortedStorage`` of the keys and values at the given spans (see ``_string_spans``).

    The keys of the most common length are decoded and sorted as numpy rows, while a forked
    helper decodes their values into shared memory; the few other entries are decoded one by
    one.
    """
    key_text, keys = key_strings
    value_text, values = value_strings
    key_len = keys[:, 1] - keys[:, 0]
    common = int(np.bincount(key_len).argmax())
    is_bulk = key_len == common
    count = int(is_bulk.sum())
    if count < trie.BULK_MIN_KEYS or common < 4 or common & 1:
        return None
    bulk_keys_at, bulk_values_at = keys[is_bulk], values[is_bulk]
    values_out = _decode_spans_forked(value_text, bulk_values_at)
    try:
        key_flat = _decode_spans(key_text, bulk_keys_at)
    finally:
        value_flat = values_out()
    if key_flat is None or value_flat is None:
        return None
    width = (common - 2) // 2
    unsorted = np.frombuffer(key_flat, np.uint8).reshape(count, width + 1)[:, 1:]
    order = argsort_rows(unsorted)
    bulk_keys = SortedRows(unsorted, order)
    value_lengths = bulk_values_at[:, 1] - bulk_values_at[:, 0]
    sizes = (value_lengths >> 1) - 1
    source: ValueSource
    if (sizes == sizes[0]).all():
        rows = np.lib.stride_tricks.as_strided(
            value_flat[1:], shape=(count, int(sizes[0])), strides=(int(sizes[0]) + 1, 1)
        )
        source = RowValues(rows, order)
    else:
        begins = np.cumsum(value_lengths >> 1) - sizes
        source = FlatValues(value_flat, begins[order], sizes[order])
    others: dict[bytes, bytes] = {}
    for (kb, ke), (vb, ve) in zip(keys[~is_bulk].tolist(), values[~is_bulk].tolist(), strict=True):
        try:
            key = decode_hex(key_text[kb:ke].decode("ascii"), "key")
            value = decode_hex(value_text[vb:ve].decode("ascii"), "value")
        except (UnicodeDecodeError, InputError):
            return None
        if key in others:
            return None
        others[key] = value
    return SortedStorage.build(bulk_keys, source, others)


def _decode_spans(raw: bytes, spans: np.ndarray, out: Any = None) -> Any:
    """The ``0x``-prefixed hex strings at ``spans`` decoded, each preceded by a zero byte.

    Written into ``out`` (a writable buffer of the right size) or a new array, which is
    returned; None if a string is not plain hex. Works in chunks so that the temporary hex text
    is reused memory, not fresh pages.
    """
    begins, ends = spans[:, 0], spans[:, 1]
    lengths = ends - begins
    if ((lengths < 2) | (lengths & 1)).any():
        return None
    chars = np.frombuffer(raw, np.uint8)
    if not ((chars[begins] == ord("0")).all() and (chars[begins + 1] == ord("x")).all()):
        return None
    if out is None:
        out = np.empty(int(lengths.sum()) >> 1, np.uint8)  # not zeroed: every byte is written
    target = np.frombuffer(out, np.uint8)
    at = 0
    for text, count in _hex_texts(raw, chars, begins, lengths):
        if isinstance(text, bytes):
            # The x's must be the prefixes' alone; then "0x" decodes as a zero byte.
            if text.count(b"x") != count:
                return None
            text = text.replace(b"x", b"0")
        try:
            part = binascii.unhexlify(text)
        except binascii.Error:
            return None
        target[at : at + len(part)] = np.frombuffer(part, np.uint8)
        at += len(part)
    return out if at == len(target) else None


def _hex_texts(
    raw: bytes, chars: np.ndarray, begins: np.ndarray, lengths: np.ndarray
) -> Iterator[tuple[bytes | np.ndarray, int]]:
    """The strings at ``begins`` concatenated, a chunk at a time, with the count in each chunk.

    Strings of one length laid out at a fixed stride (a run of entries of one storage map) are
    copied as the rows of a strided view, with each ``x`` of ``0x`` already made a ``0`` (an
    array chunk); any others are sliced one by one (a bytes chunk, ``0x`` as is).
    """
    step = 1 << 16
    n = len(begins)
    if n and (lengths == lengths[0]).all():
        width = int(lengths[0])
        stride = np.diff(begins)
        # Runs of records at a constant distance from the next.
        bounds = [0, *(np.flatnonzero(np.diff(stride)) + 1).tolist(), n]
        if len(bounds) < max(16, n // 64):
            for a, b in itertools.pairwise(bounds):
                gap = int(stride[a]) if b - a > 1 else width
                for c in range(a, b, step):
                    m = min(step, b - c)
                    rows = np.array(
                        np.lib.stride_tricks.as_strided(
                            chars[int(begins[c]) :], shape=(m, width), strides=(gap, 1)
                        )
                    )
                    rows[:, 1] = ord("0")
                    yield rows, m
            return
    view = memoryview(raw)
    for c in range(0, n, step):
        b = begins[c : c + step].tolist()
        e = (begins[c : c + step] + lengths[c : c + step]).tolist()
        yield b"".join(map(view.__getitem__, map(slice, b, e))), len(b)


def _decode_spans_forked(raw: bytes, spans: np.ndarray) -> Callable[[], np.ndarray | None]:
    """``_decode_spans`` in a forked helper (into shared memory) while the caller goes on."""
    size = int((spans[:, 1] - spans[:, 0]).sum()) >> 1
    if not forked.can_fork() or size == 0:
        result = _decode_spans(raw, spans)
        return lambda: None if result is None else np.frombuffer(result, np.uint8)
    shared = mmap.mmap(-1, size)

    worker = forked.run_forked(lambda: _decode_spans(raw, spans, shared) is not None)
    return lambda: np.frombuffer(shared, np.uint8) if forked.collect(worker) else None

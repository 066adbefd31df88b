"""Reading chain spec files and the storage of a raw genesis, with errors that say what is wrong."""

from __future__ import annotations

import binascii
import hashlib
import itertools
import mmap
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import compress
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ops_tools.chainspec import trie
from ops_tools.chainspec.trie import (
    FlatValues,
    RowValues,
    SortedRows,
    SortedStorage,
    ValueSource,
    argsort_rows,
    can_fork,
    collect,
    merge_positions,
    run_forked,
)
from ops_tools.errors import InputError

CODE_KEY = b":code"
CHILD_STORAGE_DEFAULT_PREFIX = b":child_storage:default:"


@dataclass(frozen=True)
class LoadedSpec:
    path: Path
    raw_bytes: bytes
    data: dict[str, Any]

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.raw_bytes).hexdigest()

    @property
    def genesis(self) -> dict[str, Any]:
        genesis = self.data.get("genesis")
        if not isinstance(genesis, dict):
            raise InputError(
                f"{self.path}: field 'genesis' is missing or not an object; a chain spec needs one"
            )
        return genesis

    @property
    def kind(self) -> str:
        """``raw``, ``light`` (stateRootHash only) or ``plain`` (needs build-spec --raw)."""
        genesis = self.genesis
        if "raw" in genesis:
            return "raw"
        if "stateRootHash" in genesis:
            return "light"
        return "plain"


def load_spec(path: str | Path) -> LoadedSpec:
    return parse_spec(*read_spec_bytes(path))


def read_spec_bytes(path: str | Path, map_large: bool = False) -> tuple[Path, bytes]:
    """The file's bytes; with ``map_large``, a large file is mapped rather than read.

    Mapping saves the copy and most page faults of reading a few hundred MB.
    """
    p = Path(path)
    try:
        with p.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            if map_large and size >= MAP_AT_LEAST:
                # A read-only mapping acts as bytes for everything done with it here.
                return p, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # type: ignore[return-value]
            return p, f.read()
    except FileNotFoundError:
        raise InputError(f"chain spec {p}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"chain spec {p}: is a directory, expected a JSON file") from None
    except OSError as exc:
        raise InputError(f"chain spec {p}: cannot read it: {exc.strerror}") from None


MAP_AT_LEAST = 16 << 20


def parse_spec(p: Path, raw: bytes) -> LoadedSpec:
    try:
        data = orjson.loads(raw if isinstance(raw, bytes) else memoryview(raw))
    except orjson.JSONDecodeError as exc:
        raise InputError(f"chain spec {p}: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(
            f"chain spec {p}: the top level is {type(data).__name__}, expected an object"
        )
    return LoadedSpec(p, raw, data)


def _strip_hex(text: object, what: str) -> str:
    """Normalise a hex string of the spec to lowercase digits without ``0x``, or fail naming it."""
    if not isinstance(text, str):
        raise InputError(f"{what}: expected a hex string, got {type(text).__name__}")
    body = text[2:] if text[:2] in ("0x", "0X") else text
    if len(body) & 1:
        raise InputError(
            f"{what}: odd number of hex digits in {_short(text)}; bytes need an even count"
        )
    return body.lower()


def _short(text: str) -> str:
    return text if len(text) <= 80 else f"{text[:40]}…{text[-16:]} ({len(text)} chars)"


def decode_hex(text: object, what: str) -> bytes:
    body = _strip_hex(text, what)
    try:
        return bytes.fromhex(body)
    except ValueError:
        raise InputError(f"{what}: not hex: {_short(str(text))}") from None


def hex_storage(entries: object, what: str) -> dict[bytes, bytes]:
    """A raw storage map (``{"0xkey": "0xvalue"}``) as key bytes to value bytes."""
    if not isinstance(entries, dict):
        raise InputError(f"{what}: expected an object of hex keys to hex values")
    fromhex = bytes.fromhex
    try:
        # Fast path, one C-level conversion per string; anything unusual takes the slow path,
        # which finds the offending entry and names it.
        if all(k[:2] == "0x" and v[:2] == "0x" for k, v in entries.items()):
            out = {fromhex(k[2:]): fromhex(v[2:]) for k, v in entries.items()}
            if len(out) == len(entries):
                return out
    except (ValueError, TypeError):
        pass
    out = {}
    for key, value in entries.items():
        k = decode_hex(key, f"{what}: key")
        if k in out:
            raise InputError(
                f"{what}: key {_short(key)} appears twice (keys are case-insensitive hex)"
            )
        out[k] = decode_hex(value, f"{what}: value of key {_short(key)}")
    return out


@dataclass(frozen=True)
class RawStorage:
    top: dict[bytes, bytes]
    children_default: dict[bytes, dict[bytes, bytes]]

    @property
    def code(self) -> bytes | None:
        return self.top.get(CODE_KEY)


def _decode_hex_run(
    joined: str, lengths: np.ndarray
) -> tuple[bytes, np.ndarray, np.ndarray] | None:
    """Concatenated ``0x``-prefixed hex strings of ``lengths``, decoded in one ``bytes.fromhex``.

    Returns the decoded buffer and where each string's bytes begin in it and how many there
    are; each string's bytes are preceded by one zero byte (its ``0x``, decoded as ``00``, which
    is far cheaper than cutting the prefixes out of the text). None when anything is unusual
    (no ``0x``, odd length, whitespace, non-hex digits): the caller then decodes one by one and
    names the culprit.
    """
    n = len(lengths)
    if n == 0:
        return b"", lengths, lengths
    if ((lengths < 2) | (lengths & 1)).any():
        return None
    first = int(lengths[0])
    if (lengths == first).all():
        prefixed = joined[0::first] == "0" * n and joined[1::first] == "x" * n
    else:
        starts = np.cumsum(lengths) - lengths
        chars = np.frombuffer(joined.encode("latin-1", "replace"), np.uint8)
        prefixed = bool((chars[starts] == ord("0")).all() and (chars[starts + 1] == ord("x")).all())
    # Every string starts with 0x and no other x occurs: the x's are exactly the prefixes'.
    if not prefixed or joined.count("x") != n:
        return None
    try:
        flat = bytes.fromhex(joined.replace("x", "0"))
    except ValueError:
        return None
    if 2 * len(flat) != int(lengths.sum()):
        return None  # whitespace, which fromhex skips
    sizes = (lengths >> 1) - 1
    begins = np.cumsum(lengths >> 1) - sizes
    return flat, begins, sizes


def _join_texts(texts: list[Any]) -> tuple[str, np.ndarray] | None:
    """The strings joined, with the lengths of each; None if one is not a string."""
    try:
        return "".join(texts), np.fromiter(map(len, texts), np.int64, len(texts))
    except TypeError:
        return None


def sorted_hex_storage(entries: object, what: str) -> SortedStorage | None:
    """A large raw storage map in key order, or None when it needs the general path.

    The keys of the most common length are decoded in one ``bytes.fromhex`` and sorted with
    numpy, while a forked helper decodes their values the same way into shared memory. Anything
    unusual (keys or values without ``0x``, whitespace, a non-hex digit, not a string, no
    dominant key length) returns None, and the caller's general path then names the offending
    entry.
    """
    if not isinstance(entries, dict) or len(entries) < trie.BULK_MIN_KEYS:
        return None
    texts = list(entries)
    lengths = np.fromiter(map(len, texts), np.int64, len(texts))
    common = int(np.bincount(lengths).argmax())
    is_bulk = lengths == common
    count = int(is_bulk.sum())
    if count < trie.BULK_MIN_KEYS or common < 4 or common & 1:
        return None
    values = list(entries.values())
    mask = None if count == len(texts) else is_bulk.tolist()
    # Every list is built before the fork: after it, both processes only read the strings, so
    # no page of them is copied.
    bulk_texts = texts if mask is None else list(compress(texts, mask))
    bulk_values = values if mask is None else list(compress(values, mask))
    try:
        value_lengths = np.fromiter(map(len, bulk_values), np.int64, count)
    except TypeError:
        return None
    values_out = _decode_values(bulk_values, value_lengths)
    try:
        joined = _join_texts(bulk_texts)
        decoded = None if joined is None else _decode_hex_run(*joined)
        del joined
    finally:
        value_flat = values_out()
    if decoded is None or value_flat is None:
        return None
    width = (common - 2) // 2
    # Each key's decoded bytes follow the zero byte its "0x" became.
    unsorted = np.frombuffer(decoded[0], np.uint8).reshape(count, width + 1)[:, 1:]
    order = argsort_rows(unsorted)
    bulk_keys = SortedRows(unsorted, order)
    sizes = (value_lengths >> 1) - 1
    begins = np.cumsum(value_lengths >> 1) - sizes
    source: ValueSource
    if (sizes == sizes[0]).all():
        rows = np.lib.stride_tricks.as_strided(
            value_flat[1:], shape=(count, int(sizes[0])), strides=(int(sizes[0]) + 1, 1)
        )
        source = RowValues(rows, order)
    else:
        source = FlatValues(value_flat, begins[order], sizes[order])
    others: dict[bytes, bytes] = {}
    for i in np.flatnonzero(~is_bulk).tolist():
        text = texts[i]
        key = decode_hex(text, f"{what}: key")
        if key in others:
            raise InputError(
                f"{what}: key {_short(text)} appears twice (keys are case-insensitive hex)"
            )
        others[key] = decode_hex(values[i], f"{what}: value of key {_short(text)}")
    other_keys = sorted(others)
    return SortedStorage(
        bulk_keys,
        source,
        other_keys,
        [others[k] for k in other_keys],
        merge_positions(bulk_keys, other_keys),
    )


def _decode_values(texts: list[str], lengths: np.ndarray) -> Callable[[], np.ndarray | None]:
    """Start decoding ``texts`` (as ``_decode_hex_run``) and return the call that collects them.

    With two cores, a forked helper decodes into shared memory while the caller goes on.
    """
    size = int(lengths.sum()) >> 1
    if not can_fork() or size == 0:
        result = _decode_joined(texts, lengths)
        return lambda: None if result is None else np.frombuffer(result, np.uint8)
    shared = mmap.mmap(-1, size)

    def job() -> bool:
        decoded = _decode_joined(texts, lengths)
        if decoded is None:
            return False
        shared[:] = decoded
        return True

    worker = run_forked(job)

    def finish() -> np.ndarray | None:
        return np.frombuffer(shared, np.uint8) if collect(worker) else None

    return finish


def _decode_joined(texts: list[str], lengths: np.ndarray) -> bytes | None:
    try:
        joined = "".join(texts)
    except TypeError:
        return None
    decoded = _decode_hex_run(joined, lengths)
    return None if decoded is None else decoded[0]


def raw_section(spec: LoadedSpec) -> dict[str, Any]:
    """``genesis.raw`` of a raw spec, checked to have a ``top`` map."""
    genesis = spec.genesis
    raw = genesis.get("raw")
    if raw is None:
        if "stateRootHash" in genesis:
            raise InputError(f"{spec.path}: a light spec (stateRootHash only) has no raw storage")
        raise InputError(
            f"{spec.path}: genesis is not raw (no 'genesis.raw'); convert it first with"
            " '<node> build-spec --chain <spec> --raw'"
        )
    if not isinstance(raw, dict) or "top" not in raw:
        raise InputError(f"{spec.path}: 'genesis.raw' must be an object with a 'top' storage map")
    return raw


def children_default(spec: LoadedSpec, raw: dict[str, Any]) -> dict[bytes, dict[bytes, bytes]]:
    children: dict[bytes, dict[bytes, bytes]] = {}
    raw_children = raw.get("childrenDefault") or {}
    if not isinstance(raw_children, dict):
        raise InputError(f"{spec.path}: 'genesis.raw.childrenDefault' must be an object")
    for child_key, child in raw_children.items():
        ck = decode_hex(child_key, f"{spec.path}: genesis.raw.childrenDefault key")
        children[ck] = hex_storage(child, f"{spec.path}: genesis.raw.childrenDefault[0x{ck.hex()}]")
    return children


def raw_storage(spec: LoadedSpec) -> RawStorage:
    raw = raw_section(spec)
    top = hex_storage(raw["top"], f"{spec.path}: genesis.raw.top")
    return RawStorage(top, children_default(spec, raw))


# --- Reading a large raw spec without materialising its storage map as Python strings --------


@dataclass(frozen=True)
class ScannedSpec:
    """A raw spec whose ``genesis.raw.top`` was read straight from the file's bytes.

    ``spec.data`` holds everything else; its ``genesis.raw.top`` is a placeholder.
    """

    spec: LoadedSpec
    top: SortedStorage


# Below this size (bytes) a spec is parsed as a whole: scanning pays only for large maps.
SCAN_AT_LEAST = 1 << 20


def scan_raw_spec(path: Path, raw: bytes) -> ScannedSpec | None:
    """The spec with its top storage map decoded from the bytes, or None to parse it normally.

    A genesis of a million entries spends more time creating two million JSON strings than
    anything else. This finds the top map in the bytes, checks that it is a flat object of
    plain strings laid out with one separator pattern (compact, or pretty-printed as
    ``build-spec`` does), and decodes its hex in a few bulk calls. The rest of the document is
    parsed by orjson with the map replaced by a placeholder that only the real
    ``genesis.raw.top`` can match, so the JSON is checked as strictly as before. Anything
    unexpected (escapes, other layouts, non-hex, no dominant key length) returns None.
    """
    if len(raw) < SCAN_AT_LEAST:
        return None
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
    strings = _string_spans(raw, start, end, quotes)
    if strings is None:
        return None
    storage = _sorted_spans(raw, strings, f"{path}: genesis.raw.top")
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


def _sorted_spans(
    raw: bytes, strings: tuple[np.ndarray, np.ndarray], what: str
) -> SortedStorage | None:
    """``SortedStorage`` of the key/value strings at ``strings`` (see ``_string_spans``)."""
    keys, values = strings
    key_len = keys[:, 1] - keys[:, 0]
    common = int(np.bincount(key_len).argmax())
    is_bulk = key_len == common
    count = int(is_bulk.sum())
    if count < trie.BULK_MIN_KEYS or common < 4 or common & 1:
        return None
    bulk_keys_at, bulk_values_at = keys[is_bulk], values[is_bulk]
    values_out = _decode_spans_forked(raw, bulk_values_at)
    try:
        key_flat = _decode_spans(raw, bulk_keys_at)
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
            key = decode_hex(raw[kb:ke].decode("ascii"), what)
            value = decode_hex(raw[vb:ve].decode("ascii"), what)
        except (UnicodeDecodeError, InputError):
            return None
        if key in others:
            return None
        others[key] = value
    other_keys = sorted(others)
    return SortedStorage(
        bulk_keys,
        source,
        other_keys,
        [others[k] for k in other_keys],
        merge_positions(bulk_keys, other_keys),
    )


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
    if not can_fork() or size == 0:
        result = _decode_spans(raw, spans)
        return lambda: None if result is None else np.frombuffer(result, np.uint8)
    shared = mmap.mmap(-1, size)

    worker = run_forked(lambda: _decode_spans(raw, spans, shared) is not None)
    return lambda: np.frombuffer(shared, np.uint8) if collect(worker) else None

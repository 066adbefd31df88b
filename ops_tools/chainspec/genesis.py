"""The genesis state root, header and hash of a chain spec, computed offline as a node does."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from ops_tools.chainspec import trie
from ops_tools.chainspec.hashing import blake2_256
from ops_tools.chainspec.header import ZERO_HASH, Header
from ops_tools.chainspec.runtime import CODE_BLOB_BOMB_LIMIT, RuntimeVersion, read_runtime_version
from ops_tools.chainspec.spec import (
    CHILD_STORAGE_DEFAULT_PREFIX,
    CODE_KEY,
    LoadedSpec,
    RawStorage,
    children_default,
    decode_hex,
    hex_storage,
    parse_spec,
    raw_section,
    read_spec_bytes,
)
from ops_tools.chainspec.trie import EMPTY_TRIE_ROOT, DuplicateKeyError, trie_root
from ops_tools.errors import InputError

if TYPE_CHECKING:
    from ops_tools.chainspec.sorted_storage import SortedStorage
    from ops_tools.chainspec.spec_scan import ScannedSpec

# The fast paths of a large genesis (spec_scan, sorted_storage, trie_bulk) load numpy; they are
# imported only when a spec is large, so that the node and the CLI start without it.

# Below this size (bytes) a spec file is parsed as a whole: scanning pays only for large maps.
SCAN_AT_LEAST = 1 << 20


@dataclass(frozen=True)
class GenesisInfo:
    genesis_hash: bytes
    state_root: bytes
    state_version: int | None
    runtime: RuntimeVersion | None
    code_blake2_256: bytes | None
    code_size: int | None
    storage_keys: int | None
    spec: LoadedSpec = field(repr=False, compare=False)
    kind: str

    @cached_property
    def spec_sha256(self) -> str:
        # On demand: hashing a few hundred MB is not free, and only --json shows it.
        return self.spec.sha256

    def to_json(self) -> dict[str, object]:
        rt = self.runtime
        return {
            "genesis_hash": "0x" + self.genesis_hash.hex(),
            "state_root": "0x" + self.state_root.hex(),
            "state_version": self.state_version,
            "spec_name": rt.spec_name if rt else None,
            "spec_version": rt.spec_version if rt else None,
            "code_blake2_256": "0x" + self.code_blake2_256.hex() if self.code_blake2_256 else None,
            "code_size": self.code_size,
            "storage_keys": self.storage_keys,
            "spec_sha256": self.spec_sha256,
            "spec_kind": self.kind,
        }


def genesis_hash_from_state_root(state_root: bytes) -> bytes:
    """Genesis header: zero parent, number 0, the state root, the empty extrinsics root."""
    return Header(ZERO_HASH, 0, state_root, EMPTY_TRIE_ROOT).hash()


def _child_roots(
    children: dict[bytes, dict[bytes, bytes]], state_version: int
) -> dict[bytes, bytes]:
    """The top-trie entries of the child tries (an empty child trie leaves no trace)."""
    return {
        CHILD_STORAGE_DEFAULT_PREFIX + child_key: trie_root(child, state_version)
        for child_key, child in children.items()
        if child
    }


def state_root_of(storage: RawStorage, state_version: int) -> bytes:
    top = storage.top
    if storage.children_default:
        top = {**top, **_child_roots(storage.children_default, state_version)}
    return trie_root(top, state_version)


def _sorted_state_root(
    top: SortedStorage, children: dict[bytes, dict[bytes, bytes]], state_version: int
) -> bytes:
    from ops_tools.chainspec.trie_bulk import sorted_trie_root

    extra = _child_roots(children, state_version)
    if extra:
        if any(len(k) == top.bulk_keys.shape[1] for k in extra):
            raise _NotSorted
        top = top.with_others(extra)
    return sorted_trie_root(top, state_version)


class _NotSorted(Exception):
    """The sorted fast path does not apply; use the general one."""


def genesis_of_file(path: str | Path, state_version: int | None = None) -> GenesisInfo:
    """``compute_genesis`` of the spec at ``path``; a large raw spec skips most JSON parsing."""
    p, raw = read_spec_bytes(path, map_large=True)
    scanned = _scan(p, raw)
    if scanned is not None:
        try:
            return compute_genesis(scanned.spec, state_version, sorted_top=scanned.top)
        except _NotSorted:
            pass  # e.g. a key given twice, which only a full JSON parse resolves as a node does
    return compute_genesis(parse_spec(p, raw), state_version)


def _scan(path: Path, raw: bytes) -> ScannedSpec | None:
    if len(raw) < SCAN_AT_LEAST:
        return None
    # Every entry is two "0x strings. A real network's genesis (a few hundred keys beside a runtime
    # of megabytes) is far from a bulk run: not worth loading numpy for. A mapped file (16 MiB and
    # more) is scanned without counting.
    if isinstance(raw, bytes) and raw.count(b'"0x') < 2 * trie.BULK_MIN_KEYS:
        return None
    from ops_tools.chainspec.spec_scan import scan_raw_spec

    return scan_raw_spec(path, raw)


def _sorted_top(top: object) -> SortedStorage | None:
    """``spec_scan.sorted_hex_storage``, for a map large enough to be worth it."""
    if not isinstance(top, dict) or len(top) < trie.BULK_MIN_KEYS:
        return None
    from ops_tools.chainspec.spec_scan import sorted_hex_storage

    return sorted_hex_storage(top)


def compute_genesis(
    spec: LoadedSpec,
    state_version: int | None = None,
    bomb_limit: int = CODE_BLOB_BOMB_LIMIT,
    sorted_top: SortedStorage | None = None,
) -> GenesisInfo:
    """Everything about a spec's genesis. ``state_version`` overrides the runtime's.

    ``sorted_top``, when given, is ``genesis.raw.top`` already read (see ``scan_raw_spec``).
    """
    if state_version is not None and state_version not in (0, 1):
        raise InputError(f"--state-version must be 0 or 1, got {state_version}")
    if spec.kind == "light":
        root = decode_hex(spec.genesis["stateRootHash"], f"{spec.path}: genesis.stateRootHash")
        if len(root) != 32:
            raise InputError(
                f"{spec.path}: genesis.stateRootHash must be 32 bytes, got {len(root)}"
            )
        return GenesisInfo(
            genesis_hash_from_state_root(root),
            root,
            None,
            None,
            None,
            None,
            None,
            spec,
            "light",
        )
    raw = raw_section(spec)
    top_path = f"{spec.path}: genesis.raw.top"
    children = children_default(spec, raw)
    scanned = sorted_top is not None
    if sorted_top is None:
        sorted_top = _sorted_top(raw["top"])
    storage = None
    if sorted_top is not None:
        code = sorted_top.get(CODE_KEY)
        key_count = len(sorted_top)
    else:
        storage = RawStorage(hex_storage(raw["top"], top_path), children)
        code = storage.code
        key_count = len(storage.top)
    if code is None:
        raise InputError(
            f"{spec.path}: genesis.raw.top has no ':code' (key 0x3a636f6465); a genesis without a"
            " runtime cannot be hashed, since the runtime decides the state version"
        )
    runtime = read_runtime_version(code, bomb_limit)
    version = (
        state_version if state_version is not None else (runtime.state_version if runtime else 0)
    )
    root = None
    if sorted_top is not None:
        try:
            root = _sorted_state_root(sorted_top, children, version)
        except (_NotSorted, DuplicateKeyError):
            if scanned:
                raise _NotSorted from None
            # The general path decodes one by one and names the duplicate.
            storage = RawStorage(hex_storage(raw["top"], top_path), children)
    if root is None:
        assert storage is not None
        root = state_root_of(storage, version)
    return GenesisInfo(
        genesis_hash=genesis_hash_from_state_root(root),
        state_root=root,
        state_version=version,
        runtime=runtime,
        code_blake2_256=blake2_256(code),
        code_size=len(code),
        storage_keys=key_count + sum(len(c) for c in children.values()),
        spec=spec,
        kind="raw",
    )

"""The genesis state root, header and hash of a chain spec, computed offline as a node does."""

from __future__ import annotations

from dataclasses import dataclass

from ops_tools.chainspec.hashing import blake2_256
from ops_tools.chainspec.header import ZERO_HASH, Header
from ops_tools.chainspec.runtime import CODE_BLOB_BOMB_LIMIT, RuntimeVersion, read_runtime_version
from ops_tools.chainspec.spec import (
    CHILD_STORAGE_DEFAULT_PREFIX,
    LoadedSpec,
    RawStorage,
    decode_hex,
    raw_storage,
)
from ops_tools.chainspec.trie import EMPTY_TRIE_ROOT, trie_root
from ops_tools.errors import InputError


@dataclass(frozen=True)
class GenesisInfo:
    genesis_hash: bytes
    state_root: bytes
    state_version: int | None
    runtime: RuntimeVersion | None
    code_blake2_256: bytes | None
    code_size: int | None
    storage_keys: int | None
    spec_sha256: str
    kind: str

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


def state_root_of(storage: RawStorage, state_version: int) -> bytes:
    top = storage.top
    if storage.children_default:
        top = dict(top)
        for child_key, child in storage.children_default.items():
            if not child:
                continue  # an empty child trie leaves no trace in the top trie
            top[CHILD_STORAGE_DEFAULT_PREFIX + child_key] = trie_root(child, state_version)
    return trie_root(top, state_version)


def compute_genesis(
    spec: LoadedSpec,
    state_version: int | None = None,
    bomb_limit: int = CODE_BLOB_BOMB_LIMIT,
) -> GenesisInfo:
    """Everything about a spec's genesis. ``state_version`` overrides the runtime's."""
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
            spec.sha256,
            "light",
        )
    storage = raw_storage(spec)
    code = storage.code
    if code is None:
        raise InputError(
            f"{spec.path}: genesis.raw.top has no ':code' (key 0x3a636f6465); a genesis without a"
            " runtime cannot be hashed, since the runtime decides the state version"
        )
    runtime = read_runtime_version(code, bomb_limit)
    version = (
        state_version if state_version is not None else (runtime.state_version if runtime else 0)
    )
    root = state_root_of(storage, version)
    return GenesisInfo(
        genesis_hash=genesis_hash_from_state_root(root),
        state_root=root,
        state_version=version,
        runtime=runtime,
        code_blake2_256=blake2_256(code),
        code_size=len(code),
        storage_keys=len(storage.top) + sum(len(c) for c in storage.children_default.values()),
        spec_sha256=spec.sha256,
        kind="raw",
    )

"""Reading chain spec files and the storage of a raw genesis, with errors that say what is wrong."""

from __future__ import annotations

import hashlib
import mmap
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

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

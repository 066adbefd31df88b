"""The lock of a network's default render: a reviewed record of its raw spec and genesis, so a
change to the genesis is always a visible change in the repository."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from ops_tools import atomic
from ops_tools.chainspec.canonical import canonical_json
from ops_tools.errors import InputError

LOCKED_FIELDS = ("network_sha256", "runtime_blake2_256", "raw_spec_sha256", "genesis_hash")


def lock_from_manifest(manifest: dict[str, Any]) -> dict[str, Any]:
    return {
        "network": manifest["network"]["file"],
        "network_sha256": manifest["network"]["sha256"],
        "runtime_blake2_256": manifest["runtime"]["blake2_256"],
        "raw_spec_sha256": manifest["raw_spec_sha256"],
        "genesis_hash": manifest["genesis_hash"],
    }


def default_lock_path(network_file: Path) -> Path:
    """``chainspec/networks/local.yml`` -> ``chainspec/local.lock.json``."""
    return network_file.resolve().parent.parent / f"{network_file.stem}.lock.json"


def read_lock(path: Path) -> dict[str, Any]:
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise InputError(
            f"lock file {path}: no such file; create it with 'render --update-lock'"
        ) from None
    except orjson.JSONDecodeError as exc:
        raise InputError(f"lock file {path}: not valid JSON: {exc}") from None
    missing = [f for f in LOCKED_FIELDS if f not in data]
    if missing:
        raise InputError(f"lock file {path}: missing field(s) {', '.join(missing)}")
    return data


def compare_lock(lock: dict[str, Any], manifest: dict[str, Any]) -> list[str]:
    """Human-readable differences between a lock and a fresh render (empty when it matches)."""
    fresh = lock_from_manifest(manifest)
    return [
        f"{f}: locked {lock[f]}, rendered {fresh[f]}" for f in LOCKED_FIELDS if lock[f] != fresh[f]
    ]


def write_lock(path: Path, manifest: dict[str, Any]) -> None:
    atomic.write_bytes(path, canonical_json(lock_from_manifest(manifest)))

"""The artifact manifest: what was built, from what, with what, and the checksums (pure)."""

from __future__ import annotations

import re
from typing import Any

from ops_tools.errors import InputError

FORMAT = 1
KINDS = ("node", "devnode")
MANIFEST_FILE = "manifest.json"
LOG_FILE = "build.log"

# Field -> type. Every artifact has these; the chain-spec renderer and reset rely on them.
REQUIRED: dict[str, type | tuple[type, ...]] = {
    "format": int,
    "kind": str,
    "key": str,
    "repo": str,
    "ref": str,
    "revision": str,
    "features": list,
    "node_binary": str,
    "node_binary_sha256": str,
    "node_version": str,
    "runtime": str,
    "runtime_sha256": str,
    "runtime_blake2_256": str,
    "runtime_spec_name": str,
    "runtime_spec_version": int,
    "runtime_state_version": int,
    "created_at": str,
}
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_BLAKE = re.compile(r"^0x[0-9a-f]{64}$")


def plain_file_name(value: str, field: str, where: str) -> str:
    """A manifest names files inside its own directory only: no paths, no traversal."""
    if not value or "/" in value or "\\" in value or value in (".", "..") or value.startswith("."):
        raise InputError(f"{where}: {field} {value!r} is not a plain file name inside the artifact")
    return value


def validate_manifest(data: Any, where: str) -> dict[str, Any]:
    """Check shape and types; ``where`` names the manifest in messages."""
    if not isinstance(data, dict):
        raise InputError(f"{where}: the manifest is not a JSON object")
    for field, kind in REQUIRED.items():
        if field not in data:
            raise InputError(f"{where}: field {field!r} is missing; rebuild the artifact")
        value = data[field]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise InputError(f"{where}: field {field!r} has the wrong type ({value!r})")
    if data["format"] != FORMAT:
        raise InputError(
            f"{where}: format {data['format']!r} is not supported (this suite reads {FORMAT});"
            " rebuild the artifact"
        )
    if data["kind"] not in KINDS:
        raise InputError(f"{where}: kind {data['kind']!r} is not one of {', '.join(KINDS)}")
    for field in ("node_binary_sha256", "runtime_sha256"):
        if not _HEX64.match(data[field]):
            raise InputError(
                f"{where}: {field} {data[field]!r} is not a 64-digit lowercase hex sha256"
            )
    if not _BLAKE.match(data["runtime_blake2_256"]):
        raise InputError(
            f"{where}: runtime_blake2_256 {data['runtime_blake2_256']!r} is not 0x + 64 hex digits"
        )
    plain_file_name(data["node_binary"], "node_binary", where)
    plain_file_name(data["runtime"], "runtime", where)
    if data["node_binary"] in (MANIFEST_FILE, data["runtime"]):
        raise InputError(f"{where}: node_binary {data['node_binary']!r} collides with another file")
    if data["runtime"] == MANIFEST_FILE:
        raise InputError(f"{where}: runtime {data['runtime']!r} collides with the manifest")
    return data


def node_manifest(
    *,
    key: str,
    repo: str,
    ref: str,
    revision: str,
    commit_time: int,
    package: str | None,
    features: tuple[str, ...],
    runtime_glob: str,
    builder: str,
    toolchain: dict[str, str],
    node_binary: str,
    node_binary_sha256: str,
    node_version: str,
    runtime: str,
    runtime_sha256: str,
    runtime_blake2_256: str,
    runtime_version: dict[str, Any],
    build_duration_s: float,
    created_at: str,
) -> dict[str, Any]:
    """The manifest of a freshly built node artifact; ``runtime_version`` is RuntimeVersion JSON."""
    return {
        "format": FORMAT,
        "kind": "node",
        "key": key,
        "repo": repo,
        "ref": ref,
        "revision": revision,
        "commit_time": commit_time,
        "package": package,
        "features": list(features),
        "runtime_glob": runtime_glob,
        "builder": builder,
        "toolchain_id": toolchain["id"],
        "rustc_version": toolchain["rustc"],
        "rustc_vv": toolchain["rustc_vv"],
        "cargo_version": toolchain["cargo"],
        "node_binary": node_binary,
        "node_binary_sha256": node_binary_sha256,
        "node_version": node_version,
        "runtime": runtime,
        "runtime_sha256": runtime_sha256,
        "runtime_blake2_256": runtime_blake2_256,
        "runtime_spec_name": runtime_version["spec_name"],
        "runtime_spec_version": runtime_version["spec_version"],
        "runtime_impl_version": runtime_version["impl_version"],
        "runtime_transaction_version": runtime_version["transaction_version"],
        "runtime_state_version": runtime_version["state_version"],
        "build_duration_s": round(build_duration_s, 3),
        "created_at": created_at,
        "log": LOG_FILE,
    }

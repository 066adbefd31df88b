"""Artifact directories: node binary + runtime blob + manifest.json + build.log.

``load_artifact`` is the public entry point for other concerns (chain-spec rendering, reset):
it trusts nothing in the directory until the manifest's checksums match the files.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ops_tools.atomic import staged_dir
from ops_tools.build.manifest import LOG_FILE, MANIFEST_FILE, validate_manifest
from ops_tools.chainspec.hashing import blake2_256
from ops_tools.checksums import sha256_file
from ops_tools.errors import InputError


@dataclass(frozen=True)
class Artifact:
    node_binary: Path
    runtime: Path
    manifest: dict[str, Any]
    directory: Path = field(default=Path())

    @property
    def key(self) -> str:
        return str(self.manifest["key"])


def runtime_digests(blob: bytes) -> tuple[str, str]:
    """(sha256 hex, 0x blake2_256 hex): the second is what Substrate shows as the code hash."""
    return hashlib.sha256(blob).hexdigest(), "0x" + blake2_256(blob).hex()


def load_artifact(path: str | os.PathLike[str]) -> Artifact:
    """Open and verify an artifact directory; InputError names the first thing that is wrong."""
    directory = Path(path)
    where = f"artifact {directory}"
    if not directory.is_dir():
        raise InputError(
            f"{where}: not a directory; give a directory that `ops-tools node build` wrote"
        )
    manifest_path = directory / MANIFEST_FILE
    try:
        data = json.loads(manifest_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(
            f"{where}: {MANIFEST_FILE} is missing; it is not a build artifact"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{where}: {MANIFEST_FILE} is not readable JSON ({exc})") from None
    manifest = validate_manifest(data, f"{where}: {MANIFEST_FILE}")
    binary = directory / manifest["node_binary"]
    runtime = directory / manifest["runtime"]
    for field_name, file in (("node_binary", binary), ("runtime", runtime)):
        if not file.is_file():
            raise InputError(f"{where}: {field_name} file {file.name!r} is missing")
    if not os.access(binary, os.X_OK):
        raise InputError(f"{where}: node_binary {binary.name!r} is not executable")
    actual = sha256_file(binary)
    if actual != manifest["node_binary_sha256"]:
        raise InputError(
            f"{where}: node_binary {binary.name!r} has sha256 {actual}, the manifest says"
            f" {manifest['node_binary_sha256']}; the artifact was altered: rebuild it (--force)"
        )
    sha, blake = runtime_digests(runtime.read_bytes())
    if sha != manifest["runtime_sha256"]:
        raise InputError(
            f"{where}: runtime {runtime.name!r} has sha256 {sha}, the manifest says"
            f" {manifest['runtime_sha256']}; the artifact was altered: rebuild it (--force)"
        )
    if blake != manifest["runtime_blake2_256"]:
        raise InputError(
            f"{where}: runtime {runtime.name!r} has blake2_256 {blake}, the manifest says"
            f" {manifest['runtime_blake2_256']}; rebuild the artifact (--force)"
        )
    return Artifact(node_binary=binary, runtime=runtime, manifest=manifest, directory=directory)


def write_artifact(
    final: Path,
    *,
    node_binary: Path,
    runtime: Path,
    manifest: dict[str, Any],
    log: Path | None,
) -> Artifact:
    """Stage every file, then rename the directory into place: all of it appears, or nothing."""
    with staged_dir(final) as scratch:
        shutil.copy2(node_binary, scratch / manifest["node_binary"])
        (scratch / manifest["node_binary"]).chmod(0o755)
        shutil.copy2(runtime, scratch / manifest["runtime"])
        (scratch / manifest["runtime"]).chmod(0o644)
        if log is not None and log.exists():
            shutil.copy2(log, scratch / LOG_FILE)
        (scratch / MANIFEST_FILE).write_text(
            json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
        # Verify the staged copy before it becomes visible: a bad copy must not be cached.
        load_artifact(scratch)
    final.chmod(0o755)
    return load_artifact(final)

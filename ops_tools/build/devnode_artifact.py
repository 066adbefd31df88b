"""Development-node artifacts: the development node paired with a pallet-suite runtime blob.

The development node cannot run the blob, but it reads the version from it and puts it in
``:code``, so a new pallet-suite revision gives a new genesis hash on local networks too. The
"binary" is a launcher script for the installed ``devnode``, recorded by sha256 and version.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ops_tools.atomic import staged_dir
from ops_tools.build.artifact import Artifact, load_artifact
from ops_tools.build.devnode_probe import devnode_version, find_devnode
from ops_tools.build.layout import CacheLayout, default_cache_dir
from ops_tools.build.manifest import MANIFEST_FILE
from ops_tools.errors import InputError

LAUNCHER_NAME = "devnode"
# Fields of the node build that describe how the node binary was made, not the runtime.
_NODE_ONLY = ("node_binary", "node_binary_sha256", "node_version", "log", "build_duration_s")


def launcher_script(devnode: Path) -> str:
    """A POSIX launcher: the artifact stays small and always runs the recorded devnode."""
    return (
        "#!/bin/sh\n"
        "# Development node launcher written by `ops-tools node devnode-artifact`.\n"
        f"exec {shlex.quote(str(devnode))} \"$@\"\n"
    )


def devnode_manifest(source: dict[str, Any], *, key: str, launcher_sha256: str, version: str,
                     devnode: Path, created_at: str) -> dict[str, Any]:
    """The source's runtime provenance, with the development node as the binary (pure)."""
    manifest = {k: v for k, v in source.items() if k not in _NODE_ONLY}
    manifest.update(
        kind="devnode",
        key=key,
        source_artifact=source["key"],
        source_node_binary_sha256=source["node_binary_sha256"],
        node_binary=LAUNCHER_NAME,
        node_binary_sha256=launcher_sha256,
        node_version=version,
        devnode_version=version,
        devnode_path=str(devnode),
        created_at=created_at,
    )
    return manifest


def _cached(final: Path, manifest: dict[str, Any]) -> Artifact | None:
    """The cache's artifact for this key when it is intact and records exactly this manifest.

    Re-staging it on every call would cost a copy and a rename, and would change its
    ``created_at`` (and so its manifest) each time, although nothing it contains changed.
    """
    if not final.is_dir():
        return None
    try:
        existing = load_artifact(final)  # verifies the files against their checksums
    except InputError:
        return None
    recorded = {k: v for k, v in existing.manifest.items() if k != "created_at"}
    wanted = {k: v for k, v in manifest.items() if k != "created_at"}
    return existing if recorded == wanted else None


def make_devnode_artifact(source_dir: Path, out: Path | None = None, cache: Path | None = None,
                          devnode: str | None = None, version: str | None = None) -> Artifact:
    """``version``: what ``devnode --version`` printed for ``find_devnode(devnode)``, when the
    caller already ran it (it takes a while: the caller can run it alongside other work)."""
    source = load_artifact(source_dir)
    if source.manifest["kind"] != "node":
        raise InputError(
            f"--from {source_dir}: kind is {source.manifest['kind']!r}; give a node artifact"
            " (from `ops-tools node build`)"
        )
    exe = find_devnode(devnode)
    version = version or devnode_version(exe)
    script = launcher_script(exe).encode()
    launcher_sha = hashlib.sha256(script).hexdigest()
    key = f"{source.key}-devnode-{hashlib.sha256(script + version.encode()).hexdigest()[:12]}"
    final = out or CacheLayout((cache or default_cache_dir()).expanduser()).artifact(key)
    manifest = devnode_manifest(
        source.manifest, key=key, launcher_sha256=launcher_sha, version=version, devnode=exe,
        created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    if out is None:
        cached = _cached(final, manifest)
        if cached is not None:
            return cached
    with staged_dir(final) as scratch:
        launcher = scratch / LAUNCHER_NAME
        launcher.write_bytes(script)
        launcher.chmod(0o755)
        shutil.copy2(source.runtime, scratch / manifest["runtime"])
        (scratch / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n",
                                             encoding="utf-8")
        load_artifact(scratch)
    final.chmod(0o755)
    return load_artifact(final)

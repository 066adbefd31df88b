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
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ops_tools.atomic import staged_dir
from ops_tools.build.artifact import Artifact, load_artifact
from ops_tools.build.layout import CacheLayout, default_cache_dir
from ops_tools.build.manifest import MANIFEST_FILE
from ops_tools.errors import InputError, OpsError

LAUNCHER_NAME = "devnode"
# Fields of the node build that describe how the node binary was made, not the runtime.
_NODE_ONLY = ("node_binary", "node_binary_sha256", "node_version", "log", "build_duration_s")


def find_devnode(explicit: str | None = None) -> Path:
    """The devnode console script: given, else beside this Python (the venv), else on PATH."""
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise InputError(f"--devnode {explicit!r}: no such file")
        return path.resolve()
    beside = Path(sys.executable).parent / "devnode"
    if beside.is_file():
        return beside
    found = shutil.which("devnode")
    if not found:
        raise OpsError("devnode is not installed: install the suite (pip install -e .) first")
    return Path(found).resolve()


def devnode_version(devnode: Path) -> str:
    try:
        proc = subprocess.run([str(devnode), "--version"], capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL, check=False)
    except OSError as exc:
        raise OpsError(f"{devnode} does not run ({exc})") from None
    line = proc.stdout.strip().splitlines()[0] if proc.stdout.strip() else ""
    if proc.returncode != 0 or not line:
        raise OpsError(
            f"`{devnode} --version` failed (exit {proc.returncode}): "
            f"{(proc.stderr.strip() or 'no output')[-200:]}"
        )
    return line


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


def make_devnode_artifact(source_dir: Path, out: Path | None = None, cache: Path | None = None,
                          devnode: str | None = None) -> Artifact:
    source = load_artifact(source_dir)
    if source.manifest["kind"] != "node":
        raise InputError(
            f"--from {source_dir}: kind is {source.manifest['kind']!r}; give a node artifact"
            " (from `ops-tools node build`)"
        )
    exe = find_devnode(devnode)
    version = devnode_version(exe)
    script = launcher_script(exe).encode()
    launcher_sha = hashlib.sha256(script).hexdigest()
    key = f"{source.key}-devnode-{hashlib.sha256(script + version.encode()).hexdigest()[:12]}"
    final = out or CacheLayout((cache or default_cache_dir()).expanduser()).artifact(key)
    manifest = devnode_manifest(
        source.manifest, key=key, launcher_sha256=launcher_sha, version=version, devnode=exe,
        created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
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

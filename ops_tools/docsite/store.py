"""The release store: one directory per genesis with the files operators download, and an index.

    <store>/index.json                 the releases, newest first (releases.py)
    <store>/<genesis hash>/raw.json    the raw chain spec, byte for byte as rendered
    <store>/<genesis hash>/manifest.json   the render manifest (provenance)
    <store>/<genesis hash>/<node file>     the node binary, or the development-node bundle

The site copies the store under ``/releases/``, and ``/releases/current/`` is the current one.
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ops_tools import atomic
from ops_tools.chainspec.genesis import genesis_of_file
from ops_tools.checksums import sha256_file
from ops_tools.docsite.releases import Published, check_index, empty_index, publish
from ops_tools.errors import InputError

INDEX = "index.json"
RAW = "raw.json"
MANIFEST = "manifest.json"
# Node file names in a release: the real node, or the development node as one executable file
# (ops_tools.build.devnode_bundle; docsite.bundle caches it).
NODE_FILES = {"substrate": "net-node", "devnode": "devnode"}


def read_index(store: Path) -> dict[str, Any]:
    path = store / INDEX
    if not path.exists():
        return empty_index()
    try:
        data = json.loads(path.read_text())
    except ValueError as exc:
        raise InputError(f"{path}: not JSON ({exc}); restore it from a backup") from None
    return check_index(data, str(path))


def _read_manifest(render_dir: Path) -> dict[str, Any]:
    path = render_dir / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(
            f"--render-dir {render_dir}: no {MANIFEST}; pass the output directory of"
            " 'ops-tools chainspec render'"
        ) from None
    except ValueError as exc:
        raise InputError(f"{path}: not JSON ({exc})") from None
    if not isinstance(manifest, dict) or "genesis_hash" not in manifest:
        raise InputError(f"{path}: not a render manifest (no genesis_hash)")
    return manifest


def release_from_render(
    render_dir: Path, node_binary: Path, node_kind: str, node_sha256: str | None = None
) -> dict[str, Any]:
    """The release a render output and its node make, checked: the raw spec's genesis (computed
    here, offline) and sha256 must be the ones its manifest records. ``node_sha256``: the node's,
    when the caller knows it (a cached bundle records it), else computed here."""
    if node_kind not in NODE_FILES:
        raise InputError(f"--node-kind {node_kind!r}: expected one of {', '.join(NODE_FILES)}")
    if not node_binary.is_file():
        raise InputError(f"--node-binary {node_binary}: no such file")
    manifest = _read_manifest(render_dir)
    raw = render_dir / RAW
    if not raw.is_file():
        raise InputError(f"--render-dir {render_dir}: no {RAW}")
    genesis = "0x" + genesis_of_file(raw).genesis_hash.hex()
    if genesis != manifest["genesis_hash"]:
        raise InputError(
            f"{raw}: genesis hash {genesis} differs from its manifest's {manifest['genesis_hash']};"
            " render it again"
        )
    raw_sha = sha256_file(raw)
    if manifest.get("raw_spec_sha256") not in (None, raw_sha):
        raise InputError(
            f"{raw}: sha256 {raw_sha} differs from its manifest's {manifest['raw_spec_sha256']};"
            " render it again"
        )
    runtime = manifest.get("runtime") or {}
    network = manifest.get("network") or {}
    node_name = NODE_FILES[node_kind]
    return {
        "genesis_hash": genesis,
        "chain_id": network.get("id"),
        "chain_name": network.get("name"),
        "pallet_suite_revision": manifest.get("pallet_suite_revision"),
        "runtime_spec_version": runtime.get("spec_version"),
        "node_kind": node_kind,
        "node_version": (manifest.get("node") or {}).get("version"),
        "files": {
            RAW: {"sha256": raw_sha, "size": raw.stat().st_size},
            MANIFEST: {
                "sha256": sha256_file(render_dir / MANIFEST),
                "size": (render_dir / MANIFEST).stat().st_size,
            },
            node_name: {
                "sha256": node_sha256 or sha256_file(node_binary),
                "size": node_binary.stat().st_size,
            },
        },
        "node_file": node_name,
    }


def _copy(src: Path, dest: Path, sha256: str, mode: int, link: bool = False) -> None:
    if dest.exists() and sha256_file(dest) == sha256:
        return
    tmp = dest.with_name(f".{dest.name}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        if not link:
            raise OSError("copy asked")
        os.link(src, tmp)  # a cached bundle (tens of MB) is never changed in place: share it
    except OSError:
        shutil.copyfile(src, tmp)
        tmp.chmod(mode)
    tmp.replace(dest)


def publish_release(
    store: Path, render_dir: Path, node_binary: Path, node_kind: str, now: str | None = None,
    node_sha256: str | None = None,
) -> Published:
    """Make the render in ``render_dir`` the store's current release (idempotent)."""
    release = release_from_render(render_dir, node_binary, node_kind, node_sha256)
    index = read_index(store)
    stamp = now or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    new_index, result = publish(index, release, stamp)
    if not result.changed:
        return result
    # Files first, index last: a reader that finds a release in the index finds its files.
    folder = store / release["genesis_hash"]
    folder.mkdir(parents=True, exist_ok=True)
    files = release["files"]
    _copy(render_dir / RAW, folder / RAW, files[RAW]["sha256"], 0o644)
    _copy(render_dir / MANIFEST, folder / MANIFEST, files[MANIFEST]["sha256"], 0o644)
    node = release["node_file"]
    _copy(node_binary, folder / node, files[node]["sha256"], 0o755, link=node_sha256 is not None)
    for stale in folder.iterdir():  # a node file of another kind, left by an earlier publish
        if stale.name not in files:
            stale.unlink()
    atomic.write_text(store / INDEX, json.dumps(new_index, indent=2, sort_keys=True) + "\n")
    return result

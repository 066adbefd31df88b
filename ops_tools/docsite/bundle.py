"""The development-node bundle a release publishes where the network runs development nodes,
cached by a digest of its sources: a build takes seconds (and tens of MB), so a publish with
the same sources reuses the file built before.

    <cache>/<digest>/devnode        the bundle (ops_tools.build.devnode_bundle)
    <cache>/<digest>/bundle.json    its sha256, size and source digest
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from ops_tools.atomic import staged_dir

NAME = "devnode"
META = "bundle.json"
KEEP = 2


@dataclass(frozen=True)
class CachedBundle:
    path: Path
    sha256: str
    size: int
    digest: str
    built: bool


def source_digest() -> str:
    from ops_tools.build.devnode_bundle import source_digest as digest

    return digest()


def _load(folder: Path, digest: str) -> CachedBundle | None:
    try:
        meta = json.loads((folder / META).read_text())
        size = (folder / NAME).stat().st_size
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("digest") != digest or meta.get("size") != size:
        return None
    return CachedBundle(folder / NAME, str(meta["sha256"]), size, digest, False)


def cached_bundle(cache: Path, digest: str | None = None) -> CachedBundle:
    """The bundle of the current sources: the cached one, else built once into the cache."""
    from ops_tools.build.devnode_bundle import build_devnode_bundle

    digest = digest or source_digest()
    folder = cache / digest[:24]
    found = _load(folder, digest)
    if found is not None:
        return found
    cache.mkdir(parents=True, exist_ok=True)
    with staged_dir(folder) as scratch:
        bundle = build_devnode_bundle(scratch / NAME)
        size = bundle.path.stat().st_size
        (scratch / META).write_text(
            json.dumps({"digest": digest, "sha256": bundle.sha256, "size": size}, indent=1) + "\n"
        )
    folder.chmod(0o755)
    # Older bundles go; the store keeps its own copy of every published one.
    others = [
        p for p in cache.iterdir() if p.is_dir() and p != folder and not p.name.startswith(".")
    ]
    for old in sorted(others, key=lambda p: p.stat().st_mtime, reverse=True)[KEEP - 1:]:
        shutil.rmtree(old, ignore_errors=True)
    return CachedBundle(folder / NAME, bundle.sha256, size, digest, True)

"""Where things live in the build cache, and how the runtime glob is read (pure)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ops_tools.build.refs import RepoSource
from ops_tools.errors import InputError

DEFAULT_RUNTIME_GLOB = "target/release/wbuild/*/*.compact.compressed.wasm"


def default_cache_dir(environ: Mapping[str, str] = os.environ) -> Path:
    if environ.get("OPS_TOOLS_CACHE"):
        return Path(environ["OPS_TOOLS_CACHE"]).expanduser()
    return Path.home() / ".cache" / "net-ops" / "builds"


@dataclass(frozen=True)
class CacheLayout:
    root: Path

    def mirror(self, src: RepoSource) -> Path:
        return self.root / "git" / src.mirror_name

    def worktree(self, revision: str) -> Path:
        return self.root / "worktrees" / revision

    def target(self, key: str) -> Path:
        return self.root / "targets" / key

    def artifact(self, key: str) -> Path:
        return self.root / "artifacts" / key

    def log(self, key: str) -> Path:
        return self.root / "logs" / f"{key}.log"

    def lock(self, name: str) -> Path:
        return self.root / "locks" / f"{name}.lock"


def split_runtime_glob(pattern: str) -> tuple[bool, str]:
    """(in the target dir?, pattern relative to it). ``target/...`` means cargo's target dir,
    which this pipeline keeps outside the worktree; anything else is relative to the worktree."""
    path = PurePosixPath(pattern)
    if not pattern or path.is_absolute() or ".." in path.parts:
        raise InputError(
            f"--runtime-glob {pattern!r} must be a relative pattern inside the checkout"
            f" (default {DEFAULT_RUNTIME_GLOB!r})"
        )
    if path.parts[0] == "target" and len(path.parts) > 1:
        return True, str(PurePosixPath(*path.parts[1:]))
    return False, pattern

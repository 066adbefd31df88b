"""The environment cargo runs in, chosen for reproducible output (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath

# Fixed names that the real paths are remapped to, so binaries and panics carry no
# machine-specific paths (the cache location, the user's home).
SOURCE_PREFIX = "/build/pallet-suite"
CARGO_HOME_PREFIX = "/build/cargo-home"
TARGET_PREFIX = "/build/target"

# Inherited settings that would make the output depend on who runs the build.
_DROPPED = (
    "RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_RUSTFLAGS", "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET_DIR", "CARGO_INCREMENTAL", "CARGO_BUILD_INCREMENTAL",
    "CARGO_PROFILE_RELEASE_INCREMENTAL", "SOURCE_DATE_EPOCH",
)


@dataclass(frozen=True)
class BuildPaths:
    worktree: PurePath
    cargo_home: PurePath
    target_dir: PurePath


def rustflags(paths: BuildPaths) -> list[str]:
    return [
        f"--remap-path-prefix={paths.worktree}={SOURCE_PREFIX}",
        f"--remap-path-prefix={paths.cargo_home}={CARGO_HOME_PREFIX}",
        f"--remap-path-prefix={paths.target_dir}={TARGET_PREFIX}",
    ]


def build_env(base: Mapping[str, str], paths: BuildPaths, commit_time: int) -> dict[str, str]:
    """``base`` minus what breaks reproducibility, plus the settings that favour it.

    CARGO_ENCODED_RUSTFLAGS (0x1f-separated) rather than RUSTFLAGS so that a cache path with
    spaces stays one argument; the target dir is the caller's per-build one, because a shared
    target dir lets one build's leftovers leak into another.
    """
    env = {k: v for k, v in base.items() if k not in _DROPPED}
    env.update(
        CARGO_HOME=str(paths.cargo_home),
        CARGO_TARGET_DIR=str(paths.target_dir),
        CARGO_INCREMENTAL="0",
        CARGO_ENCODED_RUSTFLAGS="\x1f".join(rustflags(paths)),
        SOURCE_DATE_EPOCH=str(commit_time),
        TZ="UTC",
        LC_ALL="C",
        # Progress bars need a terminal; the log wants plain lines.
        CARGO_TERM_PROGRESS_WHEN="never",
        CARGO_TERM_COLOR="never",
    )
    return env

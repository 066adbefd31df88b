"""``--builder docker``: cargo inside a pinned Rust image (srtool's idea), via the docker SDK.

The worktree is mounted read-only and the per-key target dir read-write at fixed container
paths, so the remapped paths (and the output) do not depend on where the host keeps its cache.
The container runs as the calling user, so the target dir stays the user's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from ops_tools.build.cargo import CargoResult, parse_message
from ops_tools.build.env import BuildPaths
from ops_tools.errors import OpsError

# Pin by tag here; pin by digest (rust@sha256:...) with --image for bit-for-bit rebuilds.
DEFAULT_IMAGE = "docker.io/library/rust:1.95.0-slim-bookworm"
SRC = PurePosixPath("/build/src")
TARGET = PurePosixPath("/build/target")
CARGO_HOME = PurePosixPath("/build/cargo-home")
# What the image needs from its own environment; the host's PATH means nothing in there.
_IMAGE_PATH = "/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def engine() -> Any:
    """A docker client that has answered a ping, or OpsError saying why there is none."""
    try:
        import docker  # the SDK is only needed for this builder
    except ImportError:
        raise OpsError("--builder docker needs the docker SDK: pip install docker") from None
    try:
        client = docker.from_env(timeout=10)
        client.ping()
    except Exception as exc:
        raise OpsError(f"--builder docker: no Docker engine answers ({exc}); use --builder local")\
            from None
    return client


def container_env(env: Mapping[str, str]) -> dict[str, str]:
    """The build env for the container: only cargo/rust settings, plus the image's PATH (pure)."""
    keep = {k: v for k, v in env.items()
            if k.startswith(("CARGO_", "RUST")) or k in ("SOURCE_DATE_EPOCH", "TZ", "LC_ALL")}
    keep.update(PATH=_IMAGE_PATH, CARGO_HOME=str(CARGO_HOME), CARGO_TARGET_DIR=str(TARGET),
                RUSTUP_HOME="/usr/local/rustup", HOME="/tmp")  # noqa: S108 - in the container
    return keep


def volumes(worktree: Path, target_dir: Path, cargo_home: Path) -> dict[str, dict[str, str]]:
    return {
        str(worktree): {"bind": str(SRC), "mode": "ro"},
        str(target_dir): {"bind": str(TARGET), "mode": "rw"},
        str(cargo_home): {"bind": str(CARGO_HOME), "mode": "rw"},
    }


def host_path(container_path: str, target_dir: Path) -> Path:
    """Map an executable path cargo reported inside the container back to the host."""
    rel = PurePosixPath(container_path).relative_to(TARGET)
    return target_dir / rel


class DockerCargo:
    name = "docker"

    def __init__(self, image: str = DEFAULT_IMAGE, cargo_home: Path | None = None) -> None:
        self.image = image
        self._cargo_home = cargo_home
        self._client: Any = None

    def _docker(self) -> Any:
        if self._client is None:
            self._client = engine()
            try:
                self._client.images.get(self.image)
            except Exception:
                self._client.images.pull(self.image)
        return self._client

    def _run_short(self, cmd: list[str]) -> str:
        out = self._docker().containers.run(self.image, cmd, remove=True, network_disabled=True,
                                            environment={"PATH": _IMAGE_PATH})
        return out.decode().strip()

    def rustc_vv(self, cwd: Path | None) -> str:
        # The image is the toolchain: its identity goes into the key with rustc's.
        return f"image: {self.image}\n" + self._run_short(["rustc", "-vV"])

    def cargo_version(self, cwd: Path | None) -> str:
        return self._run_short(["cargo", "-V"])

    def paths(self, worktree: Path, target_dir: Path, cargo_home: Path) -> BuildPaths:
        return BuildPaths(worktree=SRC, cargo_home=CARGO_HOME, target_dir=TARGET)

    def build(self, args: list[str], *, env: Mapping[str, str], worktree: Path, target_dir: Path,
              log: Path, on_line: Callable[[str], None]) -> CargoResult:
        client = self._docker()
        # The container's own cargo home (registry cache) lives in the build cache, beside
        # targets/, never the host's ~/.cargo: the image's cargo must not write into it.
        cargo_home = self._cargo_home or target_dir.parent.parent / "docker-cargo-home"
        cargo_home.mkdir(parents=True, exist_ok=True)
        result = CargoResult(returncode=-1)
        container = client.containers.run(
            self.image, ["cargo", *args], detach=True, working_dir=str(SRC),
            environment=container_env(env), volumes=volumes(worktree, target_dir, cargo_home),
            # Network stays on: --locked crates are downloaded into the cached cargo home.
            user=f"{os.getuid()}:{os.getgid()}",
        )
        try:
            with log.open("a", encoding="utf-8") as log_fh:
                log_fh.write(f"$ docker run {self.image} cargo {' '.join(args)}\n")
                pending = ""
                for chunk in container.logs(stream=True, follow=True):
                    pending += chunk.decode(errors="replace")
                    *lines, pending = pending.split("\n")
                    for line in lines:
                        if line.startswith("{"):
                            found = parse_message(line)
                            if found:
                                exe = host_path(found[1], target_dir)
                                result.executables.append((found[0], exe))
                            continue
                        log_fh.write(line + "\n")
                        on_line(line)
            result.returncode = int(container.wait().get("StatusCode", -1))
        finally:
            container.remove(force=True)
        return result

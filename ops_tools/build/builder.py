"""The build pipeline: repo + ref -> cached, verified node artifact (orchestration only)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from ops_tools.build import gitcache, smoke
from ops_tools.build.artifact import (
    Artifact,
    load_artifact,
    runtime_digests,
    write_artifact,
)
from ops_tools.build.cargo import CargoResult, LocalCargo, cargo_args
from ops_tools.build.env import BuildPaths, build_env
from ops_tools.build.keys import artifact_key, normalize_features, toolchain_id, validate_package
from ops_tools.build.layout import (
    DEFAULT_RUNTIME_GLOB,
    CacheLayout,
    default_cache_dir,
    split_runtime_glob,
)
from ops_tools.build.manifest import node_manifest
from ops_tools.build.refs import classify_repo, is_full_sha, redact, validate_ref
from ops_tools.chainspec.runtime import read_runtime_version
from ops_tools.checksums import sha256_file
from ops_tools.errors import InputError, OpsError
from ops_tools.filelock import file_lock

DEFAULT_FEATURES: tuple[str, ...] = (smoke.DEV_RUNTIME_FEATURE,)
LOG_TAIL_LINES = 25


class BuildError(OpsError):
    """A build that ran and failed; ``log_tail`` holds the last lines of its log."""

    def __init__(self, message: str, *, log: Path | None = None,
                 log_tail: list[str] | None = None) -> None:
        super().__init__(message)
        self.log = log
        self.log_tail = log_tail or []


class CargoRunner(Protocol):
    name: str

    def rustc_vv(self, cwd: Path | None) -> str: ...
    def cargo_version(self, cwd: Path | None) -> str: ...
    def paths(self, worktree: Path, target_dir: Path, cargo_home: Path) -> BuildPaths: ...
    def build(self, args: list[str], *, env: Mapping[str, str], worktree: Path,
              target_dir: Path, log: Path, on_line: Callable[[str], None]) -> CargoResult: ...


class Events:
    """Progress notifications; the CLI renders them with Rich, the API ignores them."""

    def step(self, message: str) -> None: ...
    def waiting(self, message: str) -> None: ...
    def cargo_started(self, key: str) -> None: ...
    def cargo_line(self, line: str) -> None: ...
    def cargo_finished(self) -> None: ...


@dataclass(frozen=True)
class BuildRequest:
    repo: str
    ref: str
    package: str | None = None
    features: Iterable[str] = DEFAULT_FEATURES
    runtime_glob: str = DEFAULT_RUNTIME_GLOB
    cache: Path | None = None
    force: bool = False
    allow_dirty: bool = False
    builder: str = "local"
    image: str | None = None
    chain_id: str = smoke.TESTNET_CHAIN_ID


@dataclass(frozen=True)
class BuildResult:
    artifact: Artifact
    cache_hit: bool
    key: str
    log: Path | None = field(default=None)


def make_runner(builder: str, image: str | None = None) -> CargoRunner:
    if builder == "local":
        return LocalCargo()
    if builder == "docker":
        from ops_tools.build.docker_builder import DockerCargo

        return DockerCargo(image) if image else DockerCargo()
    raise InputError(f"--builder {builder!r} is not known: use 'local' or 'docker'")


def _tail(log: Path, n: int = LOG_TAIL_LINES) -> list[str]:
    try:
        return log.read_text(encoding="utf-8", errors="replace").splitlines()[-n:]
    except OSError:
        return []


def _cached(final: Path, events: Events) -> Artifact | None:
    if not final.exists():
        return None
    try:
        return load_artifact(final)
    except InputError as exc:
        # A damaged entry is not a hit: rebuild it rather than serve it.
        events.step(f"cached artifact is invalid, rebuilding ({exc})")
        return None


def _pick_binary(executables: list[tuple[str, Path]], package: str | None, log: Path) -> Path:
    found = sorted({path for _, path in executables})
    if len(found) == 1:
        return found[0]
    if not found:
        raise BuildError(
            "cargo built no binary" + (f" for --package {package}" if package else "")
            + "; name the node's package with --package", log=log,
        )
    names = ", ".join(p.name for p in found)
    raise BuildError(f"cargo built several binaries ({names}); choose the node with --package",
                     log=log)


def _find_runtime(pattern: str, worktree: Path, target_dir: Path, log: Path) -> Path:
    in_target, rel = split_runtime_glob(pattern)
    base = target_dir if in_target else worktree
    matches = sorted(p for p in base.glob(rel) if p.is_file())
    if len(matches) == 1:
        return matches[0]
    if not matches:
        built = target_dir.glob("release/wbuild/**/*.wasm")
        wasm = sorted(str(p.relative_to(target_dir)) for p in built)
        hint = f"; wasm files built: target/{', target/'.join(wasm[:5])}" if wasm else ""
        raise BuildError(f"no runtime matched --runtime-glob {pattern!r}{hint}", log=log)
    listed = ", ".join(str(p.relative_to(base)) for p in matches[:5])
    raise BuildError(
        f"--runtime-glob {pattern!r} matched {len(matches)} files ({listed}); narrow it to the"
        " one runtime", log=log,
    )


def build(req: BuildRequest, events: Events | None = None,
          runner: CargoRunner | None = None) -> BuildResult:
    """Resolve, fetch, build (or hit the cache) and return a verified artifact."""
    events = events or Events()
    features = normalize_features(req.features)
    package = validate_package(req.package)
    split_runtime_glob(req.runtime_glob)
    validate_ref(req.ref)
    src = classify_repo(req.repo)
    shown = redact(req.repo)  # a token in the URL never reaches messages or the manifest
    gitcache.check_source(src, shown, req.allow_dirty)
    runner = runner or make_runner(req.builder, req.image)
    cache = CacheLayout((req.cache or default_cache_dir()).expanduser().resolve())

    mirror = cache.mirror(src)
    ref = req.ref
    if ref == "HEAD" and src.kind == "path":
        ref = gitcache.local_head(Path(src.location)) or ref
    want = ref if is_full_sha(ref) else None
    with file_lock(cache.lock(f"git-{mirror.name}"),
                   on_wait=lambda: events.waiting("git mirror busy")):
        events.step(f"fetching {shown}")
        gitcache.update_mirror(src, shown, mirror, want=want)
        revision = gitcache.resolve(mirror, ref, shown)
        commit_time = gitcache.commit_time(mirror, revision)
        pinned = gitcache.has_toolchain_file(mirror, revision)

    worktree = cache.worktree(revision)
    if pinned:  # rustup reads the pin from the worktree: the key must use that toolchain
        _worktree(cache, mirror, revision, events)
    rustc_vv = runner.rustc_vv(worktree if pinned else None)
    key = artifact_key(revision, features, toolchain_id(rustc_vv), package)
    final = cache.artifact(key)
    events.step(f"revision {revision[:12]} ({req.ref}), key {key}")

    if not req.force and (hit := _cached(final, events)):
        return BuildResult(artifact=hit, cache_hit=True, key=key, log=final / "build.log")

    with file_lock(cache.lock(key),
                   on_wait=lambda: events.waiting(f"another build of {key} is running")):
        # Whoever held the lock may just have built it: that is a hit too.
        if not req.force and (hit := _cached(final, events)):
            return BuildResult(artifact=hit, cache_hit=True, key=key, log=final / "build.log")
        return _build_locked(req, events, runner, cache, mirror, revision, commit_time,
                             features, package, key, rustc_vv)


def _worktree(cache: CacheLayout, mirror: Path, revision: str, events: Events) -> Path:
    with file_lock(cache.lock(f"worktree-{revision}"),
                   on_wait=lambda: events.waiting("worktree busy")):
        return gitcache.ensure_worktree(mirror, revision, cache.worktree(revision))


def _build_locked(req: BuildRequest, events: Events, runner: CargoRunner, cache: CacheLayout,
                  mirror: Path, revision: str, commit_time: int, features: tuple[str, ...],
                  package: str | None, key: str, rustc_vv: str) -> BuildResult:
    worktree = _worktree(cache, mirror, revision, events)
    target = cache.target(key)
    if req.force:
        shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True, exist_ok=True)
    log = cache.log(key)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"# ops-tools node build {redact(req.repo)} {req.ref} -> {revision}\n",
                   encoding="utf-8")

    cargo_home = Path(os.environ.get("CARGO_HOME") or Path.home() / ".cargo")
    env = build_env(os.environ, runner.paths(worktree, target, cargo_home), commit_time)
    cargo_version = runner.cargo_version(worktree)
    started = time.monotonic()
    events.cargo_started(key)
    try:
        result = runner.build(cargo_args(features, package), env=env, worktree=worktree,
                              target_dir=target, log=log, on_line=events.cargo_line)
    finally:
        events.cargo_finished()
    duration = time.monotonic() - started
    if result.returncode != 0:
        raise BuildError(
            f"cargo build --release --locked failed (exit {result.returncode}) at revision"
            f" {revision[:12]}; full log: {log}", log=log, log_tail=_tail(log),
        )
    try:
        binary = _pick_binary(result.executables, package, log)
        runtime = _find_runtime(req.runtime_glob, worktree, target, log)
        events.step("smoke-checking the node binary")
        node_version = smoke.check_version(binary)
        smoke.check_chain(binary, req.chain_id, features)
        blob = runtime.read_bytes()
        try:
            version = read_runtime_version(blob)
        except InputError as exc:
            raise BuildError(f"runtime {runtime.name} is not a usable runtime blob: {exc}",
                             log=log) from None
        if version is None:
            raise BuildError(
                f"runtime {runtime.name} carries no runtime_version section, so its spec and state"
                " versions are unknown; is the glob matching the real runtime?", log=log,
            )
    except OpsError as exc:
        with log.open("a", encoding="utf-8") as fh:
            fh.write(f"error: {exc}\n")
        raise
    runtime_sha, runtime_blake = runtime_digests(blob)
    manifest = node_manifest(
        key=key, repo=redact(req.repo), ref=req.ref, revision=revision, commit_time=commit_time,
        package=package, features=features, runtime_glob=req.runtime_glob, builder=runner.name,
        toolchain={"id": toolchain_id(rustc_vv), "rustc": rustc_vv.splitlines()[0],
                   "rustc_vv": rustc_vv, "cargo": cargo_version},
        node_binary=binary.name, node_binary_sha256=sha256_file(binary), node_version=node_version,
        runtime=runtime.name, runtime_sha256=runtime_sha, runtime_blake2_256=runtime_blake,
        runtime_version=version.to_json(), build_duration_s=duration,
        created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    artifact = write_artifact(cache.artifact(key), node_binary=binary, runtime=runtime,
                              manifest=manifest, log=log)
    return BuildResult(artifact=artifact, cache_hit=False, key=key,
                       log=artifact.directory / "build.log")

"""Cargo at the edge: the toolchain's identity and a streamed ``cargo build`` on this host."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ops_tools.build.env import BuildPaths
from ops_tools.errors import OpsError


@dataclass
class CargoResult:
    returncode: int
    executables: list[tuple[str, Path]] = field(default_factory=list)  # (package id, path)


def cargo_args(features: tuple[str, ...], package: str | None) -> list[str]:
    """``cargo build`` arguments (pure). JSON messages on stdout tell us which binaries were
    built; diagnostics stay human-readable for the log."""
    args = ["build", "--release", "--locked", "--message-format=json-render-diagnostics"]
    if package:
        args += ["--package", package]
    if features:
        args += ["--features", ",".join(features)]
    return args


def parse_message(line: str) -> tuple[str, str] | None:
    """(package id, executable) from a cargo JSON message for a built binary target."""
    try:
        msg: Any = json.loads(line)
    except json.JSONDecodeError:
        return None
    if not isinstance(msg, dict) or msg.get("reason") != "compiler-artifact":
        return None
    exe = msg.get("executable")
    kinds = (msg.get("target") or {}).get("kind") or []
    if exe and "bin" in kinds:
        return str(msg.get("package_id", "")), str(exe)
    return None


def _run_version(cmd: list[str], cwd: Path | None) -> str:
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL, check=False)
    except FileNotFoundError:
        raise OpsError(f"{cmd[0]} is not on PATH; install a Rust toolchain (rustup)") from None
    if proc.returncode != 0:
        raise OpsError(f"`{' '.join(cmd)}` failed: {proc.stderr.strip()[-300:]}")
    return proc.stdout.strip()


def _die_with_parent() -> None:
    """In the child before exec: if the builder is killed outright (SIGKILL, OOM), the kernel
    sends cargo SIGTERM, so no orphan keeps writing into the target dir. Linux only."""
    if sys.platform != "linux":
        return
    import ctypes

    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


class LocalCargo:
    """Runs the host's cargo. ``rustc -vV`` runs where rustup would resolve the toolchain."""

    name = "local"

    def rustc_vv(self, cwd: Path | None) -> str:
        return _run_version(["rustc", "-vV"], cwd)

    def cargo_version(self, cwd: Path | None) -> str:
        return _run_version(["cargo", "-V"], cwd)

    def paths(self, worktree: Path, target_dir: Path, cargo_home: Path) -> BuildPaths:
        return BuildPaths(worktree=worktree, cargo_home=cargo_home, target_dir=target_dir)

    def build(self, args: list[str], *, env: Mapping[str, str], worktree: Path, target_dir: Path,
              log: Path, on_line: Callable[[str], None]) -> CargoResult:
        result = CargoResult(returncode=-1)
        with log.open("a", encoding="utf-8") as log_fh:
            log_fh.write(f"$ cargo {' '.join(args)}\n")
            log_fh.flush()
            try:
                proc = subprocess.Popen(
                    ["cargo", *args], cwd=worktree, env=dict(env), stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                    errors="replace", start_new_session=True, preexec_fn=_die_with_parent,
                )
            except FileNotFoundError:
                raise OpsError("cargo is not on PATH; install a Rust toolchain (rustup)") from None
            try:
                assert proc.stdout is not None
                for line in proc.stdout:
                    if line.startswith("{"):
                        found = parse_message(line)
                        if found:
                            result.executables.append((found[0], Path(found[1])))
                        continue
                    log_fh.write(line)
                    log_fh.flush()
                    on_line(line.rstrip("\n"))
                result.returncode = proc.wait()
            finally:
                if proc.poll() is None:  # interrupted: take cargo and its rustc children down
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait()
        return result

"""Fixtures of the build suite: a git repository made from the fixture pallet-suite, a cache,
and a `cargo` spy (a wrapper first on PATH that records each invocation, then runs the real
cargo) so that tests can prove a cache hit starts no cargo process at all."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "pallet-suite"
OPS_TOOLS = Path(sys.executable).parent / "ops-tools"
VERSION_RS = "runtime/src/version.rs"

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "Fixture", "GIT_AUTHOR_EMAIL": "fixture@example.invalid",
    "GIT_COMMITTER_NAME": "Fixture", "GIT_COMMITTER_EMAIL": "fixture@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, **_GIT_ENV}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


@dataclass
class SuiteRepo:
    path: Path

    def commit(self, message: str, edits: dict[str, str] | None = None) -> str:
        for rel, text in (edits or {}).items():
            (self.path / rel).write_text(text)
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "-m", message)
        return git(self.path, "rev-parse", "HEAD")

    def set_spec_version(self, version: int) -> dict[str, str]:
        text = (self.path / VERSION_RS).read_text()
        old = next(ln for ln in text.splitlines() if "SPEC_VERSION" in ln)
        return {VERSION_RS: text.replace(old, f"pub const SPEC_VERSION: u32 = {version};")}


@pytest.fixture
def suite(tmp_path: Path) -> SuiteRepo:
    """The fixture pallet-suite as a git repository with one commit on branch main."""
    path = tmp_path / "pallet-suite"
    shutil.copytree(FIXTURE, path, ignore=shutil.ignore_patterns("target"))
    git(path, "init", "-q", "-b", "main")
    repo = SuiteRepo(path)
    repo.commit("commit 1: spec_version 6")
    return repo


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


@dataclass
class CargoSpy:
    bin_dir: Path
    record: Path

    def calls(self) -> list[str]:
        return self.record.read_text().splitlines() if self.record.exists() else []

    def builds(self) -> list[str]:
        return [c for c in self.calls() if c.startswith("build")]

    def pids(self) -> list[int]:
        pids = self.record.with_name(self.record.name + ".pids")
        return [int(p) for p in pids.read_text().split()] if pids.exists() else []

    def env(self) -> dict[str, str]:
        return {**os.environ, "PATH": f"{self.bin_dir}{os.pathsep}{os.environ['PATH']}",
                "CARGO_SPY_LOG": str(self.record)}


@pytest.fixture
def cargo_spy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CargoSpy:
    real = shutil.which("cargo")
    if real is None:
        pytest.skip("cargo is not installed: the build suite needs a Rust toolchain")
    bin_dir = tmp_path / "spy-bin"
    bin_dir.mkdir()
    record = tmp_path / "cargo-calls.log"
    wrapper = bin_dir / "cargo"
    # CARGO_SPY_DELAY widens the window in which a concurrent build must wait for the lock.
    wrapper.write_text(
        "#!/bin/sh\n"
        'echo "$*" >> "$CARGO_SPY_LOG"\n'
        'echo "$$" >> "$CARGO_SPY_LOG.pids"\n'
        'if [ "$1" = build ] && [ -n "$CARGO_SPY_DELAY" ]; then\n'
        "  trap 'kill $! 2>/dev/null; exit 143' TERM\n"
        '  sleep "$CARGO_SPY_DELAY" & wait $!\n'
        "  trap - TERM\n"
        "fi\n"
        f'exec "{real}" "$@"\n'
    )
    wrapper.chmod(0o755)
    spy = CargoSpy(bin_dir, record)
    for key, value in spy.env().items():
        monkeypatch.setenv(key, value)
    return spy


def run_cli(*args: str, env: dict[str, str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(OPS_TOOLS), *args], capture_output=True, text=True,
                          env=env or dict(os.environ), timeout=timeout, check=False)


def artifact_dirs(cache: Path) -> list[Path]:
    """Every entry under artifacts/, staging leftovers (dot-names) included."""
    root = cache / "artifacts"
    return sorted(root.iterdir()) if root.exists() else []

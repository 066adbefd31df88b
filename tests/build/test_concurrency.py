"""Two builds of one revision at once: one builds, the other waits on the lock and hits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ops_tools.build.artifact import load_artifact
from tests.build.conftest import OPS_TOOLS, CargoSpy, SuiteRepo, artifact_dirs


def test_concurrent_builds_of_one_revision(suite: SuiteRepo, cache: Path, cargo_spy: CargoSpy):
    # The spy sleeps before cargo starts so that the second process surely arrives mid-build.
    env = {**cargo_spy.env(), "CARGO_SPY_DELAY": "2"}
    args = [str(OPS_TOOLS), "node", "build", "--repo", str(suite.path), "--ref", "main",
            "--cache", str(cache), "--json"]
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env, start_new_session=True) for _ in range(2)]
    try:
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    metas = [json.loads(out) for out, _ in outs]
    assert metas[0]["artifact_dir"] == metas[1]["artifact_dir"]
    assert sorted(m["cache_hit"] for m in metas) == [False, True]
    assert len(cargo_spy.builds()) == 1, cargo_spy.calls()
    waited = next(err for (_, err), m in zip(outs, metas, strict=True) if m["cache_hit"])
    assert "waiting: another build of" in waited
    art = load_artifact(metas[0]["artifact_dir"])
    assert art.manifest["node_binary_sha256"] == metas[1]["node_binary_sha256"]
    assert [p.name for p in artifact_dirs(cache)] == [art.directory.name]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie is gone for our purpose: it runs nothing.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ", 1)[1].startswith("Z")


def _wait_for(condition, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_killed_build_leaves_no_artifact_no_cargo_and_a_usable_cache(
        suite: SuiteRepo, cache: Path, cargo_spy: CargoSpy, sig: signal.Signals):
    """SIGTERM unwinds the builder, which stops cargo; on SIGKILL the kernel's parent-death
    signal stops it. Either way the lock is released and nothing half-built remains."""
    env = {**cargo_spy.env(), "CARGO_SPY_DELAY": "120"}  # cargo "runs" until we stop it
    args = [str(OPS_TOOLS), "node", "build", "--repo", str(suite.path), "--ref", "main",
            "--cache", str(cache)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    try:
        _wait_for(lambda: cargo_spy.builds(), "cargo to start")
        proc.send_signal(sig)  # the builder only; cargo is in a session of its own
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode != 0
    _wait_for(lambda: all(_gone(pid) for pid in cargo_spy.pids()), "cargo to be stopped")
    assert artifact_dirs(cache) == []
    # The lock died with the process: the next build neither waits nor finds debris.
    again = subprocess.run([*args, "--json"], capture_output=True, text=True, env=cargo_spy.env(),
                           timeout=300, check=False)
    assert again.returncode == 0, again.stderr
    assert "waiting" not in again.stderr
    assert json.loads(again.stdout)["cache_hit"] is False

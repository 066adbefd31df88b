"""Reset-cycle figures on the local network with the fixture pallet-suite: the no-change
decision time with a warm build cache, and a full reset's total time and downtime.

    python benchmarks/reset_cycle.py

Everything runs in temporary directories (network, cycle state, build cache) and is purged.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OPS_TOOLS = Path(sys.executable).with_name("ops-tools")
FIXTURE = ROOT / "tests" / "fixtures" / "pallet-suite"
VERSION_RS = "runtime/src/version.rs"
DECISION_RUNS = 5
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
}


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, check=True, capture_output=True
    )


def ops(env: dict[str, str], *args: str) -> tuple[float, dict]:
    start = time.perf_counter()
    proc = subprocess.run(
        [str(OPS_TOOLS), *args], env=env, cwd=ROOT, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"ops-tools {' '.join(args[:2])} failed: {proc.stderr.strip()[-400:]}")
    return elapsed, json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="reset-bench-") as tmp:
        base = Path(tmp)
        env = {
            **os.environ,
            "NET_LOCALNET_DIR": str(base / "localnet"),
            "NET_OPS_STATE": str(base / "state"),
            "OPS_TOOLS_CACHE": str(base / "cache"),
        }
        repo = base / "pallet-suite"
        shutil.copytree(FIXTURE, repo, ignore=shutil.ignore_patterns("target"))
        git(repo, "init", "-q", "-b", "main")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "commit 1")
        cycle = [
            "reset-cycle",
            "--inventory",
            str(ROOT / "inventories" / "local"),
            "--repo",
            str(repo),
            "--ref",
            "main",
            "--json",
        ]
        try:
            ops(env, "localnet", "up", "--json")
            ops(env, *cycle, "--yes")  # first cycle: builds (cold cache) and resets
            # The no-change decision: the same revision again, as the timer runs it on every
            # commit. Several runs, since one run on a shared machine says little.
            times = []
            for _ in range(DECISION_RUNS):
                load = os.getloadavg()[0]
                decision_s, report = ops(env, *cycle, "--dry-run")
                if report["decision"] != "nothing":
                    raise SystemExit(f"expected no change, the cycle decided {report['decision']}")
                times.append((decision_s, load))
            walls = sorted(t for t, _ in times)
            print(
                f"no-change decision (--dry-run, warm build cache), {DECISION_RUNS} runs:"
                f" median {statistics.median(walls):.2f} s, min {walls[0]:.2f} s,"
                f" max {walls[-1]:.2f} s (load average {min(ld for _, ld in times):.1f}"
                f"-{max(ld for _, ld in times):.1f})"
            )
            decision_s, report = ops(env, *cycle)
            print(f"no-change decision without --dry-run: {decision_s:.2f} s")
            for phase in report["phases"]:
                print(f"  {phase['name']:<18} {phase['seconds']:6.2f} s  {phase['detail'][:60]}")
            version = repo / VERSION_RS
            text = version.read_text()
            line = next(ln for ln in text.splitlines() if "SPEC_VERSION" in ln)
            version.write_text(text.replace(line, "pub const SPEC_VERSION: u32 = 99;"))
            git(repo, "commit", "-qam", "commit 2")
            total_s, report = ops(env, *cycle, "--yes")
            print(
                f"full reset: total {total_s:.1f} s (cycle's own {report['total_s']:.1f} s),"
                f" downtime {report['downtime_s']:.1f} s"
            )
            for phase in report["phases"]:
                print(f"  {phase['name']:<18} {phase['seconds']:6.2f} s")
        finally:
            subprocess.run(
                [str(OPS_TOOLS), "localnet", "down", "--purge", "--yes"],
                env=env,
                cwd=ROOT,
                capture_output=True,
                check=False,
            )


if __name__ == "__main__":
    main()

"""Reset-cycle figures on the local network with the fixture pallet-suite: the no-change
decision time with a warm build cache, the repair of a stopped rpc-0, and a full reset's total
time and downtime.

    python benchmarks/reset_cycle.py
    python benchmarks/reset_cycle.py --testnet-shape

Everything runs in temporary directories (network, cycle state, build cache) and is purged.
``--testnet-shape`` measures the reset's downtime on the test network's shape instead: the fleet
of ``tests/hosts/test_testnet_shape.py`` (five machines, systemd, SSH, the edge with TLS), built
by that module's fixture, then its reset onto a new revision; the downtime, the phases and each
service's not-ready window are what the test prints.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

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


class ReadyWatch:
    """Polls every public service's /ready during a reset: each service's downtime runs from
    its first answer that is not ready (or of another genesis) to its first ready answer on
    the new genesis (the chain check's detail is the genesis the service serves). The docs
    site is always up; its figure runs from the public RPC's first answer that is not the old
    genesis to the first time its current release (``release.json``) names the new one."""

    def __init__(self, public: dict) -> None:
        self.urls = {k: v for k, v in public.items() if k != "rpc_url" and v}
        self.rpc = public["rpc_url"].replace("ws://", "http://")
        self.samples: list[tuple[float, str, bool, str]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _sample(self, client: httpx.Client, name: str, url: str) -> tuple[bool, str]:
        if name == "docs_url":
            body = client.get(url.rstrip("/") + "/releases/current/release.json").json()
            return True, body.get("genesis_hash", "")
        body = client.get(url.rstrip("/") + "/ready").json()
        checks = body.get("checks") or body.get("error", {}).get("checks") or []
        genesis = next((c.get("detail", "") for c in checks if c.get("name") == "chain"), "")
        return body.get("ready") is True, genesis

    def _poll(self) -> None:
        request = {"jsonrpc": "2.0", "id": 1, "method": "chain_getBlockHash", "params": [0]}
        with httpx.Client(timeout=2) as client:
            while not self.stop.is_set():
                try:
                    genesis = client.post(self.rpc, json=request).json().get("result") or ""
                except (httpx.HTTPError, ValueError):
                    genesis = ""
                self.samples.append((time.monotonic(), "rpc_url", bool(genesis), genesis))
                for name, url in self.urls.items():
                    try:
                        ok, genesis = self._sample(client, name, url)
                    except (httpx.HTTPError, ValueError):
                        ok, genesis = False, ""
                    self.samples.append((time.monotonic(), name, ok, genesis))
                self.stop.wait(0.2)

    def _window(self, name: str) -> tuple[float | None, float | None]:
        seen = [(t, ok, g) for t, n, ok, g in self.samples if n == name]
        before = next((g for _, ok, g in seen if ok), None)
        down = next((t for t, ok, g in seen if not ok or g != before), None)
        up = next((t for t, ok, g in seen
                   if down is not None and t > down and ok and g != before), None)
        return down, up

    def report(self) -> list[str]:
        lines = []
        rpc_down, _ = self._window("rpc_url")
        for name in self.urls:
            down, up = self._window(name)
            if name == "docs_url":
                down = rpc_down
            if down is None or up is None:
                lines.append(f"{name}: no ready answer on a new genesis seen")
            else:
                lines.append(f"{name}: ready on the new genesis {up - down:.1f} s after it"
                             " stopped being ready on the old one")
        return lines


def breakdown_lines(report: dict) -> list[str]:
    """The downtime window by phase, and inside each phase its host batches and waits."""
    lines = [f"downtime breakdown ({report['downtime_s']:.2f} s):"]
    for part in report.get("downtime_breakdown", []):
        lines.append(f"  {part['phase']:<18} {part['seconds']:6.2f} s")
        lines += [f"      {step['seconds']:6.2f} s  {step['step'][:140]}" for step in part["steps"]]
    return lines


def repair(env: dict[str, str], base: Path, cycle: list[str]) -> None:
    """A stopped public RPC node (rpc-0) in front of authorities on the expected genesis: the
    cycle decides repair and starts it again, with the same chain."""
    conf = base / "localnet" / "supervisor" / "supervisord.conf"
    subprocess.run(["supervisorctl", "-c", str(conf), "stop", "net-node-rpc-0"],
                   check=True, capture_output=True)
    wall_s, report = ops(env, *cycle, "--yes")
    if report["decision"] != "repair":
        raise SystemExit(f"expected a repair, the cycle decided {report['decision']}")
    phases = {p["name"]: p["seconds"] for p in report["phases"]}
    repair_s = sum(phases[p] for p in ("repair-nodes", "repair-edge", "verify"))
    print(f"repair of a stopped rpc-0: {wall_s:.2f} s wall (cycle's own {report['total_s']:.2f} s;"
          f" compare with its public-endpoint probes {phases['compare']:.2f} s, repair phases"
          f" {repair_s:.2f} s)")


SHAPE_TESTS = "site_deploys or reset_cycle_over_ssh"


def testnet_shape() -> None:
    load = os.getloadavg()[0]
    uptime = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout
    print(f"uptime at the start: {uptime.strip()}")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/hosts/test_testnet_shape.py", "-x", "-q", "-s",
         "-p", "no:cacheprovider", "-k", SHAPE_TESTS],
        cwd=ROOT, capture_output=True, text=True, check=False)
    out = proc.stdout.splitlines()
    start = next((i for i, ln in enumerate(out) if ln.startswith("reset-cycle downtime:")), None)
    if proc.returncode != 0 or start is None:
        raise SystemExit(f"the testnet shape's reset failed:\n{proc.stdout[-2000:]}")
    print(f"testnet shape (load average {load:.1f} at the start,"
          f" {os.getloadavg()[0]:.1f} at the end):")
    for line in out[start:]:
        if line.startswith(("reset-cycle downtime:", "  ", "services not ready",
                            "downtime breakdown")):
            print(line.rstrip(". "))


def main() -> None:
    if sys.argv[1:] == ["--testnet-shape"]:
        testnet_shape()
        return
    uptime = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout
    print(f"uptime at the start: {uptime.strip()}")
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
            _, up = ops(env, "localnet", "up", "--json")
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
            repair(env, base, cycle)
            version = repo / VERSION_RS
            text = version.read_text()
            line = next(ln for ln in text.splitlines() if "SPEC_VERSION" in ln)
            version.write_text(text.replace(line, "pub const SPEC_VERSION: u32 = 99;"))
            git(repo, "commit", "-qam", "commit 2")
            watch = ReadyWatch(up.get("public") or {})
            watch.thread.start()
            try:
                total_s, report = ops(env, *cycle, "--yes")
                time.sleep(1)
            finally:
                watch.stop.set()
                watch.thread.join()
            print(
                f"full reset: total {total_s:.1f} s (cycle's own {report['total_s']:.1f} s),"
                f" downtime {report['downtime_s']:.1f} s"
            )
            for phase in report["phases"]:
                print(f"  {phase['name']:<18} {phase['seconds']:6.2f} s")
            for line in breakdown_lines(report):
                print(line)
            for line in watch.report():
                print(f"service downtime: {line}")
            uptime = subprocess.run(["uptime"], capture_output=True, text=True,
                                    check=False).stdout
            print(f"uptime after the reset: {uptime.strip()}")
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

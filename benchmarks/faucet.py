"""Sustained drips per second to distinct accounts, and the latency to inclusion (p50, p95).

    python benchmarks/faucet.py [--drips N] [--concurrency C] [--slot-ms MS]

Self-contained, on free loopback ports (no flock needed): a development node on the built-in
development chain with its slot set to the local network's (1 s, chainspec/networks/local.yml)
and the faucet's development account (//Faucet) endowed, and ``net-faucet`` with loopback exempt
from the per-IP limit. C clients keep C requests in flight until N drips have been asked for;
each request ends when its transfer is in a block (the faucet's 200). Prints one line per figure.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import httpx
from substrateinterface import Keypair

ROOT = Path(__file__).resolve().parent.parent
DEVNODE = Path(sys.executable).with_name("devnode")
DRIP = 1_000_000_000_000
FAUCET_SEED = "//Faucet"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(what: str, probe, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if probe():
                return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not come up within {timeout:g} s")


@contextlib.contextmanager
def process(args: list[str], log: Path, **kw) -> Iterator[subprocess.Popen]:
    with log.open("wb") as fh:
        proc = subprocess.Popen(args, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True, **kw)
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def chain_spec(tmp: Path, slot_ms: int) -> Path:
    plain = json.loads(subprocess.run([str(DEVNODE), "build-spec", "--chain", "dev"],
                                      capture_output=True, check=True, text=True).stdout)
    patch = plain["genesis"]["runtimeGenesis"]["patch"]
    patch["aura"]["slotDurationMs"] = slot_ms
    faucet = Keypair.create_from_uri(FAUCET_SEED, ss58_format=42).ss58_address
    patch["balances"]["balances"].append([faucet, 10**18])
    path = tmp / "bench-spec.json"
    path.write_text(json.dumps(plain))
    return path


def rpc(url: str, method: str) -> dict:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": []}).encode()
    req = urllib.request.Request(url, body, {"Content-Type": "application/json"})  # noqa: S310
    with urllib.request.urlopen(req, timeout=5) as resp:  # noqa: S310 - loopback
        return json.loads(resp.read())["result"]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--drips", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--slot-ms", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="faucet-bench-") as tmp_name:
        tmp = Path(tmp_name)
        rpc_port, p2p_port, faucet_port = free_port(), free_port(), free_port()
        node_args = [str(DEVNODE), "--chain", str(chain_spec(tmp, args.slot_ms)), "--alice",
                     "--validator", "--tmp", "--rpc-port", str(rpc_port), "--port",
                     str(p2p_port), "--no-prometheus"]
        seed = tmp / "faucet.seed"
        seed.write_text(FAUCET_SEED + "\n")
        os.chmod(seed, 0o600)
        config = tmp / "faucet.yml"
        config.write_text(json.dumps({
            "listen_port": faucet_port, "state_dir": str(tmp / "state"),
            "rpc_url": f"ws://127.0.0.1:{rpc_port}", "seed_file": str(seed),
            "drip_plancks": DRIP, "poll_interval_s": 0.1, "log_level": "warning",
            "limits": {"recipient_window_s": 3600, "global_per_hour": 1_000_000,
                       "exempt_networks": ["127.0.0.0/8"]},
        }))
        node_http = f"http://127.0.0.1:{rpc_port}"
        faucet_url = f"http://127.0.0.1:{faucet_port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("NET_")}
        with process(node_args, tmp / "devnode.log", cwd=tmp):
            try:
                wait("devnode", lambda: int(rpc(node_http, "chain_getHeader")["number"], 16) >= 1)
            except RuntimeError:
                print((tmp / "devnode.log").read_text()[-2000:], file=sys.stderr)
                raise
            with process([sys.executable, "-m", "ops_tools.services.faucet.cli", "--config",
                          str(config)], tmp / "faucet.log", cwd=ROOT, env=env):
                try:
                    wait("faucet", lambda: httpx.get(faucet_url + "/ready").status_code == 200)
                except RuntimeError:
                    print((tmp / "faucet.log").read_text()[-2000:], file=sys.stderr)
                    raise
                run(faucet_url, args)


def run(url: str, args: argparse.Namespace) -> None:
    dests = [Keypair.create_from_uri(f"//bench/{time.time_ns()}/{i}", ss58_format=42)
             .ss58_address for i in range(args.drips)]
    client = httpx.Client(timeout=120, limits=httpx.Limits(max_connections=args.concurrency))

    def one(dest: str) -> tuple[float, int]:
        start = time.perf_counter()
        resp = client.post(url + "/drip-public", json={"recipient": dest})
        return time.perf_counter() - start, resp.status_code

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        results = list(pool.map(one, dests))
    wall = time.perf_counter() - start
    latencies = [t for t, status in results if status == 200]
    failed = len(results) - len(latencies)
    metrics = client.get(url + "/metrics").text
    wanted = ("faucet_inclusion_seconds_sum", "faucet_inclusion_seconds_count")
    server = [line for line in metrics.splitlines() if line.startswith(wanted)]
    total, count = (float(line.split()[-1]) for line in server)
    print(f"drips: {len(latencies)} of {args.drips} ok ({failed} failed), concurrency"
          f" {args.concurrency}, slot {args.slot_ms} ms")
    print(f"sustained: {len(latencies) / wall:.1f} drips/s ({wall:.1f} s wall)")
    print(f"request to inclusion: p50 {statistics.median(latencies):.2f} s,"
          f" p95 {percentile(latencies, 0.95):.2f} s, max {max(latencies):.2f} s")
    print(f"submission to inclusion (server, mean): {total / count:.2f} s")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

"""Two faucet instances on one PostgreSQL under load and faults (issue 29).

    python benchmarks/faucet_shared.py [--drips 50] [--same 20] [--lost 10] [--hang-s 30]

Self-contained on free loopback ports: a throwaway PostgreSQL server, a development node on the
local network's slot (1 s) with three faucet accounts endowed, and ``net-faucet`` instances A and
B (two seeds: the lease allows one signer per seed) on the one database, with loopback as their
trusted proxy so that each phase speaks for its own client address (X-Forwarded-For).

1. ``--drips`` concurrent drips to distinct new accounts, alternating between A and B, with the
   per-IP limit set to exactly that many: every answer, nonce errors in both logs, each balance.
2. The same accounts again, each through the other instance (the recipient limit), and one new
   account on each (the per-IP limit): every one must be refused.
3. ``--same`` concurrent requests for one new account with one Idempotency-Key, across A and B:
   the transfers that reached the account and the distinct extrinsic hashes answered.
4. ``--lost`` concurrent drips through instance C, whose RPC goes through a TCP proxy that drops
   every connection right after ``author_submitExtrinsic`` reached the node.
5. Drips in flight on A and B, then the node hangs (SIGSTOP) for ``--hang-s`` seconds: the time
   until each instance's /ready is red, the time from SIGCONT until it is green again, and the
   outcome of every drip that was in flight.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from substrateinterface import Keypair

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.services.*

from faucet import percentile, process, wait

from ops_tools.chain.rpc import RpcClient
from tests.conftest import free_port
from tests.services.faucet.proxy import lossy_proxy
from tests.services.postgres import running_postgres
from tests.support.devnode import DevNode, plain_spec, raw_spec

ROOT = Path(__file__).resolve().parents[1]
DRIP = 1_000_000_000_000
SEEDS = {"A": "//FaucetBenchA", "B": "//FaucetBenchB", "C": "//FaucetBenchC"}


def chain(tmp: Path) -> DevNode:
    plain = plain_spec(tmp / "spec.json", chain_id="bench_faucet", slot_ms=1000)
    spec = json.loads(plain.read_text())
    balances = spec["genesis"]["runtimeGenesis"]["patch"]["balances"]["balances"]
    balances += [[Keypair.create_from_uri(s, ss58_format=42).ss58_address, 10**18]
                 for s in SEEDS.values()]
    plain.write_text(json.dumps(spec))
    node = DevNode(tmp / "node" / "base", str(raw_spec(plain)), "--no-prometheus", name="bench")
    node.start()
    node.wait_for(lambda: node.best() >= 1, timeout=90, what="the first block")
    return node


def config(tmp: Path, name: str, rpc_url: str, db_url: str, per_ip: int) -> Path:
    seed = tmp / f"{name}.seed"
    seed.write_text(SEEDS[name] + "\n")
    os.chmod(seed, 0o600)
    path = tmp / f"{name}.yml"
    path.write_text(json.dumps({
        "listen_port": free_port(), "state_dir": str(tmp / name), "rpc_url": rpc_url,
        "database_url": db_url, "seed_file": str(seed), "drip_plancks": DRIP,
        "poll_interval_s": 0.1, "trusted_proxies": ["127.0.0.1/32"], "rpc_timeout_s": 5,
        "limits": {"recipient_window_s": 3600, "global_per_hour": 100_000,
                   "per_ip": {"count": per_ip, "window_s": 3600}},
    }))
    return path


def url_of(cfg: Path) -> str:
    return f"http://127.0.0.1:{json.loads(cfg.read_text())['listen_port']}"


def post(url: str, dest: str, client: str, key: str | None = None,
         timeout: float = 180) -> tuple[int, dict, float]:
    headers = {"X-Forwarded-For": client, **({"Idempotency-Key": key} if key else {})}
    start = time.perf_counter()
    try:
        resp = httpx.post(url + "/drip-public", json={"recipient": dest}, headers=headers,
                          timeout=timeout)
    except httpx.HTTPError as exc:
        return 0, {"error": {"code": type(exc).__name__}}, time.perf_counter() - start
    return resp.status_code, resp.json(), time.perf_counter() - start


def fresh(tag: str, n: int) -> list[str]:
    return [Keypair.create_from_uri(f"//bench/{tag}/{time.time_ns()}/{i}", ss58_format=42)
            .ss58_address for i in range(n)]


def balances(node: DevNode, dests: list[str]) -> list[int]:
    from substrateinterface import SubstrateInterface

    reader = SubstrateInterface(url=node.http, ss58_format=42)
    return [int(reader.query("System", "Account", [d]).value["data"]["free"]) for d in dests]


def codes(results: list[tuple[int, dict, float]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for status, body, _ in results:
        key = str(status) if status == 200 else f"{status} {body['error']['code']}"
        out[key] = out.get(key, 0) + 1
    return out


def in_flight(urls: tuple[str, ...]) -> int:
    total = 0.0
    for url in urls:
        for line in httpx.get(url + "/metrics").text.splitlines():
            if line.startswith("faucet_drips_in_flight "):
                total += float(line.split()[1])
    return int(total)


def until(url: str, status: int, limit_s: float) -> float | None:
    """Seconds until /ready answers ``status`` (None: not within ``limit_s``)."""
    start = time.monotonic()
    while time.monotonic() - start < limit_s:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url + "/ready", timeout=30).status_code == status:
                return time.monotonic() - start
        time.sleep(0.1)
    return None


def shown(times: dict[str, float | None]) -> str:
    return ", ".join(f"{n} {'never' if t is None else f'{t:.1f} s'}" for n, t in times.items())


def nonce_errors(logs: list[Path]) -> int:
    return sum(p.read_text(errors="replace").count("nonce refused by the pool") for p in logs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--drips", type=int, default=50)
    parser.add_argument("--same", type=int, default=20)
    parser.add_argument("--lost", type=int, default=10)
    parser.add_argument("--hang-s", type=float, default=30)
    args = parser.parse_args()
    print(f"load average at start {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    with tempfile.TemporaryDirectory(prefix="faucet-shared-") as tmp_name, \
            contextlib.ExitStack() as stack:
        tmp = Path(tmp_name)
        server = stack.enter_context(running_postgres(tmp / "pg", free_port()))
        node = chain(tmp)
        stack.callback(node.stop)
        stack.callback(lambda: node.proc and os.kill(node.proc.pid, signal.SIGCONT))
        db_url = server.create_database("faucet")
        env = {k: v for k, v in os.environ.items() if not k.startswith("NET_")}
        cfgs = {n: config(tmp, n, node.ws, db_url, args.drips) for n in ("A", "B")}
        proxy = stack.enter_context(lossy_proxy(node.ws, mode="after"))
        cfgs["C"] = config(tmp, "C", proxy.url, db_url, args.drips)
        urls = {n: url_of(c) for n, c in cfgs.items()}
        logs = [tmp / f"{n}.log" for n in cfgs]
        for name, cfg in cfgs.items():
            stack.enter_context(process([sys.executable, "-m", "ops_tools.services.faucet.cli",
                                         "--config", str(cfg)], tmp / f"{name}.log", cwd=ROOT,
                                        env=env))
        for name, url in urls.items():
            wait(f"faucet {name}", lambda u=url: httpx.get(u + "/ready").status_code == 200)
        a, b = urls["A"], urls["B"]

        # 1. concurrent drips across the two instances
        dests = fresh("many", args.drips)
        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(args.drips) as pool:
            many = list(pool.map(lambda i: post((a, b)[i % 2], dests[i], "198.51.100.1"),
                                 range(args.drips)))
        wall = time.perf_counter() - start
        got = balances(node, dests)
        ok = [t for s, _, t in many if s == 200]
        print(f"1. {args.drips} concurrent drips over A and B: {codes(many)}, wall {wall:.1f} s,"
              f" p50 {statistics.median(ok):.2f} s, p95 {percentile(ok, 0.95):.2f} s;"
              f" funded exactly once: {sum(g == DRIP for g in got)} of {len(dests)};"
              f" nonce errors in the logs: {nonce_errors(logs)}")

        # 2. the limits hold across the instances
        with concurrent.futures.ThreadPoolExecutor(args.drips) as pool:
            again = list(pool.map(lambda i: post((b, a)[i % 2], dests[i], "198.51.100.1"),
                                  range(args.drips)))
        over = [post(u, d, "198.51.100.1") for u, d in zip((a, b), fresh("over-ip", 2),
                                                             strict=True)]
        after = balances(node, dests)
        print(f"2. the same recipients through the other instance: {codes(again)}; new"
              f" recipients over the shared per-IP limit: {codes(over)}; balances unchanged:"
              f" {after == got}")

        # 3. one key, many concurrent requests, both instances
        (dest,) = fresh("same", 1)
        with concurrent.futures.ThreadPoolExecutor(args.same) as pool:
            same = list(pool.map(lambda i: post((a, b)[i % 2], dest, "198.51.100.2",
                                                key="bench-same-key"), range(args.same)))
        hashes = {body.get("extrinsic_hash") for s, body, _ in same if s == 200}
        (held,) = balances(node, [dest])
        print(f"3. {args.same} concurrent requests, one Idempotency-Key, over A and B:"
              f" {codes(same)}; distinct extrinsic hashes {len(hashes)}; drips received"
              f" {held // DRIP}")

        # 4. every submission's answer lost
        lost_dests = fresh("lost", args.lost)
        before = int(RpcClient(node.http).call(
            "system_accountNextIndex",
            [Keypair.create_from_uri(SEEDS["C"], ss58_format=42).ss58_address]))
        with concurrent.futures.ThreadPoolExecutor(args.lost) as pool:
            lost = list(pool.map(lambda d: post(urls["C"], d, "198.51.100.3"), lost_dests))
        after_nonce = int(RpcClient(node.http).call(
            "system_accountNextIndex",
            [Keypair.create_from_uri(SEEDS["C"], ss58_format=42).ss58_address]))
        got = balances(node, lost_dests)
        ok = [t for s, _, t in lost if s == 200]
        print(f"4. {args.lost} concurrent drips, every submission's answer lost"
              f" ({proxy.lost} dropped): {codes(lost)}, p50 {statistics.median(ok):.2f} s;"
              f" funded exactly once {sum(g == DRIP for g in got)} of {args.lost}; transfers"
              f" signed {after_nonce - before}")

        # 5. the node hangs
        hang_dests = fresh("hang", 10)
        assert node.proc is not None
        with concurrent.futures.ThreadPoolExecutor(len(hang_dests) + 2) as pool:
            flying = [pool.submit(post, (a, b)[i % 2], d, "198.51.100.4")
                      for i, d in enumerate(hang_dests)]
            deadline = time.monotonic() + 30
            while in_flight((a, b)) < len(hang_dests) // 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            sent = in_flight((a, b))
            os.kill(node.proc.pid, signal.SIGSTOP)
            red = dict(zip(("A", "B"), pool.map(lambda u: until(u, 503, args.hang_s), (a, b)),
                           strict=True))
            time.sleep(max(0.0, args.hang_s - max(t or 0 for t in red.values())))
            os.kill(node.proc.pid, signal.SIGCONT)
            green = dict(zip(("A", "B"), pool.map(lambda u: until(u, 200, 120), (a, b)),
                             strict=True))
            outcomes = [f.result() for f in flying]
        got = balances(node, hang_dests)
        print(f"5. node hung {args.hang_s:g} s, {len(hang_dests)} drips asked, {sent} of them"
              f" sent: /ready red after {shown(red)}; green after SIGCONT {shown(green)};"
              f" the drips: {codes(outcomes)}, funded {sum(g == DRIP for g in got)},"
              f" funded twice {sum(g > DRIP for g in got)}")
    print(f"load average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

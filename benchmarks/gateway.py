"""Overhead of the gateway over calling the engine directly, and of LiteLLM's proxy over the
same engine, in one run: p50 and p99 latency at 1, 16 and 64 concurrent clients, streaming and
not.

    python benchmarks/gateway.py [--requests N] [--no-litellm]

Every path ends at the same engine, the TEST ENGINE run as its own OpenAI-compatible server
(``net-test-engine``, no per-token delay):

- direct:   client -> engine
- gateway:  client -> net-gateway -> net-worker -> engine (the whole serving path: key check,
            budget reservation in SQLite, routing, receipt)
- worker:   client -> net-worker -> engine (the worker hop alone, to split the figure)
- litellm:  client -> LiteLLM proxy -> engine (installed by this script into its own
            virtualenv under .state/benchmarks, never a dependency of the project)

Latency is to the last byte of the answer. Overhead = the path's percentile minus the direct
path's at the same concurrency. A development node on free ports provides the chain the
gateway needs (registration, epochs). Everything listens on loopback and is stopped at the end.
The load generator shares the machine's cores with the servers: figures are upper bounds.

"proxy CPU ms/req" is the CPU time (user and system, every thread) the path's proxies (worker;
gateway and worker; LiteLLM) spent per request, background loops included: unlike latency it
does not grow with what else runs on the machine, so it is the figure to compare on a loaded
one. The 1-minute load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import yaml
from substrateinterface import Keypair, SubstrateInterface

from ops_tools.chain.wire.worker_token import worker_token
from ops_tools.services.gateway import store
from ops_tools.services.gateway.database import open_database

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support
from tests.support.devnode import DevNode, free_port, plain_spec, raw_spec

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
# The newest release whose dependencies the package index here resolves (1.109 needs a newer
# certifi than it has).
LITELLM_VERSION = "1.100.5"
LITELLM_VENV = ROOT / ".state" / "benchmarks" / "litellm-venv"
MODEL = "net-test-chat"
# A throwaway secret of this run (loopback only).
SECRET = secrets.token_urlsafe(24)
OPERATOR = "//BenchOperator"
TOKEN = 10**12
# The testnet's epoch (600 blocks): the worker's on-chain heartbeat, a second or two of CPU in
# substrate-interface, comes once an hour there, not every few seconds of the run.
EPOCH_BLOCKS = 600
BODY: dict[str, Any] = {"model": MODEL, "max_tokens": 16,
                        "messages": [{"role": "user", "content": "benchmark the hot path"}]}


def wait(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if check():
                return
        time.sleep(0.2)
    raise RuntimeError(f"timed out waiting for {what}")


class Procs:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: list[subprocess.Popen[bytes]] = []
        self.pids: dict[str, int] = {}

    def start(self, name: str, args: list[str], env: dict[str, str] | None = None,
              cpus: set[int] | None = None) -> None:
        """``cpus``: the CPUs the program and its children may run on (default: this one's)."""
        pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
        with (self.root / f"{name}.log").open("wb") as log:
            self.procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                               start_new_session=True, env=env,
                                               preexec_fn=pin))
        self.pids[name] = self.procs[-1].pid

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def secret_file(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(0o600)
    return str(path)


def ensure_litellm() -> Path | None:
    exe = LITELLM_VENV / "bin" / "litellm"
    if exe.exists():
        return exe
    print(f"installing litellm[proxy]=={LITELLM_VERSION} into {LITELLM_VENV} ...", flush=True)
    LITELLM_VENV.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(LITELLM_VENV)], check=True)
    proc = subprocess.run([str(LITELLM_VENV / "bin" / "pip"), "install", "-q",
                           f"litellm[proxy]=={LITELLM_VERSION}"], check=False)
    if proc.returncode != 0 or not exe.exists():
        print("litellm could not be installed: its figures are missing from this run")
        return None
    return exe


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU time of ``pids`` and their children so far (every thread): what the
    proxies spend, whatever else runs on the machine."""
    total = 0
    for pid in pids:
        for child in [pid, *_children(pid)]:
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{child}/stat").read_text().rpartition(")")[2].split()
                total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    out: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            text = (task / "children").read_text().split()
            for child in map(int, text):
                out += [child, *_children(child)]
    return out


# The processes each path adds in front of the engine (their CPU time is reported per request).
PROXIES = {"direct": [], "worker": ["worker"], "gateway": ["gateway", "worker"],
           "litellm": ["litellm"]}


@contextlib.contextmanager
def stack(root: Path, with_litellm: bool) -> Iterator[dict[str, Any]]:
    procs = Procs(root)
    node = DevNode(root / "node", str(raw_spec(plain_spec(root / "plain.json",
                                                          chain_id="bench_net", slot_ms=1000,
                                                          epoch_length=EPOCH_BLOCKS))),
                   name="bench").start()
    try:
        urls: dict[str, Any] = {}
        engine_port = free_port()
        procs.start("engine", [str(BIN / "net-test-engine"), "--port", str(engine_port),
                               "--model", MODEL])
        urls["direct"] = f"http://127.0.0.1:{engine_port}"
        wait(lambda: httpx.get(urls["direct"] + "/v1/models").status_code == 200, 30, "engine")
        _fund_and_register(node)

        gw_port, w_port = free_port(), free_port()
        db_url = f"sqlite:///{root / 'gateway.db'}"
        (root / "gateway.yml").write_text(yaml.safe_dump({
            "listen_port": gw_port, "state_dir": str(root / "gw"), "database_url": db_url,
            "rpc_url": node.ws, "log_level": "warning",
            "worker_secret_file": secret_file(root / "gw.secret", SECRET),
            "allow_private_endpoints": True,
        }))
        procs.start("gateway", [str(BIN / "net-gateway"), "--config", str(root / "gateway.yml")])
        urls["gateway"] = f"http://127.0.0.1:{gw_port}"
        (root / "worker.yml").write_text(yaml.safe_dump({
            "listen_port": w_port, "gateway_url": urls["gateway"], "rpc_url": node.ws,
            "engine_url": urls["direct"], "capacity": 256, "models": [MODEL],
            "log_level": "warning",
            "dev_suri_file": secret_file(root / "w.suri", OPERATOR),
        }))
        procs.start("worker", [str(BIN / "net-worker"), "--config", str(root / "worker.yml")])
        urls["worker"] = f"http://127.0.0.1:{w_port}"
        wait(lambda: MODEL in httpx.get(urls["gateway"] + "/v1/workers").json()
             ["live_workers_per_model"], 90, "the worker to be live at the gateway")
        db = open_database(db_url, pool_size=1)
        key, _ = store.create_key(db.engine, Keypair.create_from_uri("//Alice").ss58_address,
                                  budget=None, rpm=None, tpm=None)
        db.dispose()
        urls["gateway_key"] = key
        # The worker's own token, as the gateway derives it (the benchmark holds its key).
        genesis = httpx.get(urls["gateway"] + "/v1/workers").json()["genesis_hash"]
        operator = Keypair.create_from_uri(OPERATOR, ss58_format=42).ss58_address
        urls["worker_token"] = worker_token(SECRET.encode(), genesis,
                                            f"{operator}@{urls['worker']}")

        if with_litellm and (exe := ensure_litellm()) is not None:
            lt_port = free_port()
            (root / "litellm.yaml").write_text(yaml.safe_dump({
                "model_list": [{"model_name": MODEL, "litellm_params": {
                    "model": f"openai/{MODEL}", "api_base": urls["direct"] + "/v1",
                    "api_key": "unused"}}],
                "litellm_settings": {"drop_params": True, "set_verbose": False},
            }))
            env = {**os.environ, "LITELLM_LOG": "ERROR", "LITELLM_TELEMETRY": "False",
                   "NO_DOCS": "True"}
            procs.start("litellm", [str(exe), "--config", str(root / "litellm.yaml"),
                                    "--host", "127.0.0.1", "--port", str(lt_port),
                                    "--num_workers", "1"], env=env)
            urls["litellm"] = f"http://127.0.0.1:{lt_port}"
            wait(lambda: httpx.get(urls["litellm"] + "/health/liveliness").status_code == 200,
                 180, "litellm")
        urls["pids"] = procs.pids
        yield urls
    finally:
        procs.stop()
        node.stop()


def _fund_and_register(node: DevNode) -> None:
    keypair = Keypair.create_from_uri(OPERATOR, ss58_format=42)
    substrate = SubstrateInterface(url=node.ws, ss58_format=42)
    try:
        for signer, module, call, params in (
            ("//Alice", "Balances", "transfer_keep_alive",
             {"dest": keypair.ss58_address, "value": 5 * TOKEN}),
            (OPERATOR, "OperatorStake", "register",
             {"stake": 2 * TOKEN, "attestation_hash": "0x" + "00" * 32}),
        ):
            xt = substrate.create_signed_extrinsic(
                call=substrate.compose_call(module, call, params),
                keypair=Keypair.create_from_uri(signer, ss58_format=42))
            assert substrate.submit_extrinsic(xt, wait_for_inclusion=True).is_success
    finally:
        substrate.close()


async def run_path(base: str, headers: dict[str, str], stream: bool, concurrency: int,
                   total: int) -> list[float | None]:
    """``total`` requests from ``concurrency`` clients, each request after the previous one of
    its client; the latencies in ms, None for a failed request (after a warm-up that fills the
    connection pools)."""
    body = {**BODY, "stream": stream}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, headers=headers, limits=limits,
                                 timeout=60) as client:

        async def one() -> float | None:
            start = time.perf_counter()
            try:
                if stream:
                    async with client.stream("POST", "/v1/chat/completions", json=body) as r:
                        async for _chunk in r.aiter_raw():
                            pass
                else:
                    r = await client.post("/v1/chat/completions", json=body)
            except httpx.HTTPError:
                return None
            if r.status_code != 200:
                return None
            return (time.perf_counter() - start) * 1000

        async def client_loop(n: int, out: list[float | None]) -> None:
            for _ in range(n):
                out.append(await one())

        warm: list[float | None] = []
        await asyncio.gather(*(client_loop(2, warm) for _ in range(concurrency)))
        latencies: list[float | None] = []
        share, extra = divmod(total, concurrency)
        await asyncio.gather(*(client_loop(share + (i < extra), latencies)
                               for i in range(concurrency)))
    return latencies


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400,
                        help="requests per path and setting (default 400)")
    parser.add_argument("--no-litellm", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-gateway-") as tmp, \
            stack(Path(tmp), not args.no_litellm) as urls:
        key = urls.pop("gateway_key")
        token = urls.pop("worker_token")
        headers = {"direct": {}, "worker": {"Authorization": f"Bearer {token}"},
                   "gateway": {"Authorization": f"Bearer {key}"},
                   "litellm": {"Authorization": "Bearer unused"}}
        paths = [p for p in ("direct", "worker", "gateway", "litellm") if p in urls]
        pids = urls.pop("pids")
        print(f"load average at start: {os.getloadavg()[0]:.2f} (1 min)")
        print(f"{'stream':>6} {'conc':>4} {'path':>8} {'p50 ms':>8} {'p99 ms':>8}"
              f" {'p50 overhead':>13} {'p99 overhead':>13} {'proxy CPU ms/req':>17}")
        for stream in (False, True):
            for concurrency in (1, 16, 64):
                base: tuple[float, float] | None = None
                for path in paths:
                    proxies = [pids[name] for name in PROXIES[path]]
                    cpu_before = cpu_seconds(proxies)
                    results = asyncio.run(run_path(urls[path], headers[path], stream,
                                                   concurrency, args.requests))
                    # Every request the proxies served, the warm-up's included.
                    cpu = (cpu_seconds(proxies) - cpu_before) * 1000 / (
                        args.requests + 2 * concurrency)
                    lat = [x for x in results if x is not None]
                    failed = len(results) - len(lat)
                    if not lat:
                        print(f"{stream!s:>6} {concurrency:>4} {path:>8}  every request failed")
                        continue
                    p50, p99 = statistics.median(lat), pct(lat, 0.99)
                    if path == "direct":
                        base = (p50, p99)
                        over = ("", "")
                    else:
                        assert base is not None
                        over = (f"{p50 - base[0]:+.2f}", f"{p99 - base[1]:+.2f}")
                    note = f"  ({failed} of {len(results)} failed)" if failed else ""
                    print(f"{stream!s:>6} {concurrency:>4} {path:>8} {p50:>8.2f} {p99:>8.2f}"
                          f" {over[0]:>13} {over[1]:>13} {cpu:>17.2f}{note}", flush=True)
        print(f"load average at end: {os.getloadavg()[0]:.2f} (1 min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

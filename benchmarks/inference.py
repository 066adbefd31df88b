"""A real model through the gateway against the same model called directly: time to first token
(TTFT) and generated tokens per second at 1, 4 and 8 concurrent clients.

    python benchmarks/inference.py [--rounds N] [--per-client N] [--max-tokens N]
    python benchmarks/inference.py --net NET.json   # on `localnet up --engine llamacpp --json`

Without ``--net`` it starts its own stack on free loopback ports (the stack of
benchmarks/gateway.py: a development node, net-gateway, net-worker with ``engine_kind:
llamacpp``) in front of ``net-local-engine`` (llama-cpp-python's server, Gemma 3 270M Q4_K_M,
two threads), so it needs no local network and stops everything at the end. Three paths:

- direct:   client -> llama.cpp server
- worker:   client -> net-worker -> llama.cpp server (with the worker's own token, as the
            gateway sends it: the worker hop alone; only on the benchmark's own stack)
- gateway:  client -> net-gateway -> net-worker -> llama.cpp server (key check, budget
            reservation, routing, receipt; the worker adds the stream's usage chunk)

The worker is given the engine's model file (``engine_model_path``), so it counts the usage
chunk with the model's tokenizer in process; ``--engine-counts`` leaves it out (the worker then
asks the engine's ``/extras/tokenize/count``, as before).

Each client sends streamed completions (``stream_options.include_usage``) at temperature 0, one
after another. TTFT is to the first chunk carrying text; tokens/s is the text chunks of every
request of a run (llama-cpp-python streams one chunk per generated token; the direct path has no
usage chunk, so both paths count the same way) over the run's wall time.

Method (the machine is shared and the engine's two threads take both cores, so the direct path
alone drifts between minutes by more than the targets): every path first gets ``--warmup``
requests that are not counted (model pages, connection pools, the worker's tokenizer); then, for
each client count, ``--rounds`` rounds, each one run per path (``--per-client`` requests per
client), the paths' order rotating round by round so that none always goes first. A path's run is
summed up by its TTFT median and its tokens/s; the overhead is taken **per round**, each path's
run against the direct run next to it in time (a drift in the machine's load hits both), and
printed as the median of the rounds' differences with its spread (the middle half and the
extremes). The engine answers one request at a time (llama-cpp-python's server holds a lock), so
more clients queue: TTFT grows with them on both paths and there is the place in the queue, not
an overhead; at 4 and 8 clients compare the throughput. The load generator shares the machine's
cores with the servers: the 1-minute load average is printed with each client count.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml
from substrateinterface import Keypair

from ops_tools.services.gateway import store
from ops_tools.services.gateway.database import open_database

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.gateway import (
    BIN,
    EPOCH_BLOCKS,
    OPERATOR,
    SECRET,
    Procs,
    _fund_and_register,
    secret_file,
    wait,
)
from ops_tools.chain.wire.worker_token import worker_token
from ops_tools.worker.local_engine import packaged_model_file
from tests.support.devnode import DevNode, free_port, plain_spec, raw_spec

PROMPTS = ["The capital of France is", "Water boils at", "The largest planet is",
           "A good breakfast includes", "The first computers were", "Rain forms when"]


@dataclass
class Run:
    ttft_ms: list[float]
    tokens: int
    wall_s: float


async def one(client: httpx.AsyncClient, url: str, headers: dict[str, str], prompt: str,
              max_tokens: int) -> tuple[float, int]:
    body = {"model": "gemma-3-270m", "prompt": prompt, "max_tokens": max_tokens,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    start = time.perf_counter()
    first: float | None = None
    tokens = 0
    async with client.stream("POST", url + "/v1/completions", json=body,
                             headers=headers) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if first is None and event.get("choices") and event["choices"][0].get("text"):
                first = time.perf_counter()
            if event.get("choices") and event["choices"][0].get("text"):
                tokens += 1
    assert first is not None, "no text in the stream"
    return (first - start) * 1000, tokens


async def run(url: str, headers: dict[str, str], clients: int, per_client: int,
              max_tokens: int) -> Run:
    async with httpx.AsyncClient(timeout=600) as client:
        async def worker(index: int) -> list[tuple[float, int]]:
            return [await one(client, url, headers, PROMPTS[(index + i) % len(PROMPTS)],
                              max_tokens) for i in range(per_client)]

        start = time.perf_counter()
        results = await asyncio.gather(*(worker(i) for i in range(clients)))
        wall = time.perf_counter() - start
    flat = [r for rs in results for r in rs]
    return Run([t for t, _ in flat], sum(n for _, n in flat), wall)


@contextlib.contextmanager
def stack(root: Path, engine_counts: bool = False) -> Iterator[dict[str, Any]]:
    """The network's shape on free ports, as ``localnet up --json`` describes it."""
    procs = Procs(root)
    node = DevNode(root / "node", str(raw_spec(plain_spec(
        root / "plain.json", chain_id="bench_net", slot_ms=1000, epoch_length=EPOCH_BLOCKS))),
        name="bench").start()
    try:
        engine_port, gw_port, w_port = free_port(), free_port(), free_port()
        engine_url = f"http://127.0.0.1:{engine_port}"
        (root / "engine.yml").write_text(yaml.safe_dump({
            "kind": "llamacpp", "listen_port": engine_port, "state_dir": str(root),
            "threads": 2}))
        procs.start("engine", [str(BIN / "net-local-engine"), "--config",
                               str(root / "engine.yml")])
        wait(lambda: httpx.get(engine_url + "/v1/models").status_code == 200, 600, "engine")
        _fund_and_register(node)
        db_url = f"sqlite:///{root / 'gateway.db'}"
        (root / "gateway.yml").write_text(yaml.safe_dump({
            "listen_port": gw_port, "state_dir": str(root / "gw"), "database_url": db_url,
            "rpc_url": node.ws, "log_level": "warning",
            "worker_secret_file": secret_file(root / "gw.secret", SECRET),
            "allow_private_endpoints": True,
        }))
        procs.start("gateway", [str(BIN / "net-gateway"), "--config", str(root / "gateway.yml")])
        gateway_url = f"http://127.0.0.1:{gw_port}"
        worker = {
            "listen_port": w_port, "gateway_url": gateway_url, "rpc_url": node.ws,
            "engine_url": engine_url, "engine_kind": "llamacpp", "capacity": 16,
            "log_level": "warning", "dev_suri_file": secret_file(root / "w.suri", OPERATOR),
        }
        if not engine_counts:
            worker["engine_model_path"] = str(packaged_model_file(root))
        (root / "worker.yml").write_text(yaml.safe_dump(worker))
        procs.start("worker", [str(BIN / "net-worker"), "--config", str(root / "worker.yml")])
        wait(lambda: "gemma-3-270m" in httpx.get(gateway_url + "/v1/workers").json()
             ["live_workers_per_model"], 120, "the worker to be live at the gateway")
        db = open_database(db_url, pool_size=1)
        key, _ = store.create_key(db.engine, Keypair.create_from_uri("//Alice").ss58_address,
                                  budget=None, rpm=None, tpm=None)
        db.dispose()
        # The worker's own token, as the gateway derives it (the benchmark holds its secret).
        genesis = httpx.get(gateway_url + "/v1/workers").json()["genesis_hash"]
        operator = Keypair.create_from_uri(OPERATOR, ss58_format=42).ss58_address
        worker_url = f"http://127.0.0.1:{w_port}"
        token = worker_token(SECRET.encode(), genesis, f"{operator}@{worker_url}")
        yield {"workers": [{"host": "bench", "engine_kind": "llamacpp",
                            "engine_url": engine_url, "models": ["gemma-3-270m"]}],
               "public": {"gateway_url": gateway_url}, "gateway_api_key": key,
               "bench_worker": {"url": worker_url, "token": token}}
    finally:
        procs.stop()
        node.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--net", type=Path,
                        help="the output of ops-tools localnet up --engine llamacpp --json"
                        " (default: a stack of its own on free ports)")
    parser.add_argument("--rounds", type=int, default=7,
                        help="runs per path and client count (the paths' order rotates)")
    parser.add_argument("--per-client", type=int, default=3, help="requests per client and run")
    parser.add_argument("--warmup", type=int, default=3, help="uncounted requests per path first")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--clients", default="1,4,8", help="comma-separated client counts")
    parser.add_argument("--engine-counts", action="store_true",
                        help="no engine_model_path for the worker: the engine counts the usage")
    args = parser.parse_args()
    if args.net is not None:
        measure(json.loads(args.net.read_text()), args)
        return
    with (tempfile.TemporaryDirectory(prefix="bench-inference-") as tmp,
          stack(Path(tmp), args.engine_counts) as net):
        measure(net, args)


def spread(values: list[float], signed: bool = False) -> str:
    """median [p25 .. p75] (min .. max) of ``values``: the middle half and the extremes."""
    ordered = sorted(values)
    f = "{:+.1f}" if signed else "{:.1f}"
    if len(ordered) < 2:
        return f.format(ordered[0])
    q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    return (f"{f.format(statistics.median(ordered))} [{f.format(q1)} .. {f.format(q3)}]"
            f" ({f.format(ordered[0])} .. {f.format(ordered[-1])})")


def measure(net: dict[str, Any], args: Any) -> None:
    engine = next(w for w in net["workers"] if w["engine_kind"] == "llamacpp")
    paths = {"direct": (engine["engine_url"], {})}
    if "bench_worker" in net:
        paths["worker"] = (net["bench_worker"]["url"],
                           {"Authorization": f"Bearer {net['bench_worker']['token']}"})
    paths["gateway"] = (net["public"]["gateway_url"],
                        {"Authorization": f"Bearer {net['gateway_api_key']}"})
    names = list(paths)
    print(f"rounds {args.rounds}, {args.per_client} requests per client and run,"
          f" {args.warmup} warm-up requests per path, {args.max_tokens} tokens each")
    for _ in range(args.warmup):  # the model's pages, the pools, the worker's tokenizer
        for name in names:
            asyncio.run(run(*paths[name], 1, 1, args.max_tokens))
    for clients in (int(c) for c in args.clients.split(",")):
        load_start = os.getloadavg()[0]
        runs: dict[str, list[Run]] = {name: [] for name in names}
        for round_ in range(args.rounds):
            # Rotate the order: no path always runs first (after the others' idle gap) or last.
            for name in names[round_ % len(names):] + names[:round_ % len(names)]:
                runs[name].append(asyncio.run(run(*paths[name], clients, args.per_client,
                                                  args.max_tokens)))
        ttft = {n: [statistics.median(r.ttft_ms) for r in rs] for n, rs in runs.items()}
        rate = {n: [r.tokens / r.wall_s for r in rs] for n, rs in runs.items()}
        print(f"\n{clients} client(s); load average {load_start:.2f} -> {os.getloadavg()[0]:.2f};"
              " per path the median of its runs [middle half] (extremes):")
        for name in names:
            print(f"  {name:7} TTFT ms {spread(ttft[name])}; tokens/s {spread(rate[name])}")
        for name in names[1:]:
            d_ttft = [g - d for g, d in zip(ttft[name], ttft["direct"], strict=True)]
            d_rate = [(g - d) / d * 100 for g, d in zip(rate[name], rate["direct"], strict=True)]
            print(f"  {name} - direct, per round: TTFT ms {spread(d_ttft, True)};"
                  f" tokens/s % {spread(d_rate, True)}")


if __name__ == "__main__":
    main()

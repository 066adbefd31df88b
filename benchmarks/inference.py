"""A real model through the gateway against the same model called directly: time to first token
(TTFT) and generated tokens per second at 1, 4 and 8 concurrent clients.

    python benchmarks/inference.py [--rounds N] [--per-client N] [--max-tokens N]
    python benchmarks/inference.py --engine-cpus 1   # the engine alone on CPU 1, the rest on 0
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
alone drifts between minutes by more than the targets): every path first gets ``--warmup`` requests
that are not counted (model pages, connection pools, the worker's tokenizer); then, for each client
count, ``--rounds`` rounds, each one run per path (``--per-client`` requests per client), the
paths' order rotating round by round so that none always goes first. A path's run is summed up by
its TTFT median, its tokens/s, and two parts of a request's time that show where a difference in
tokens/s comes from: the median gap between text chunks (the relay's per-token cost, and the engine
slowed by processes sharing its cores) and the tail (the last text chunk to the end of the stream:
the usage chunk and ``[DONE]``). The overhead is taken **per round**, each path's run against the
direct run next to it in time (a drift in the machine's load hits both), and printed as the median
of the rounds' differences with its spread (the middle half and the extremes). The engine answers
one request at a time (llama-cpp-python's server holds a lock), so more clients queue: TTFT grows
with them on both paths and there is the place in the queue, not an overhead; at 4 and 8 clients
compare the throughput. The load generator shares the machine's cores with the servers: the
1-minute load average is printed with each client count.

``--engine-cpus`` gives the engine CPUs of its own (as a GPU engine has its device: the relays'
work then cannot slow the generation) with one thread per CPU, and pins the benchmark, the
node, the gateway and the worker to the others; it needs the benchmark's own stack.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
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
class Answer:
    ttft_ms: float
    tokens: int
    gap_ms: float  # median between text chunks
    tail_ms: float  # the last text chunk to the end of the stream


@dataclass
class Run:
    answers: list[Answer]
    wall_s: float

    @property
    def tokens(self) -> int:
        return sum(a.tokens for a in self.answers)

    def median(self, field: str) -> float:
        return statistics.median(getattr(a, field) for a in self.answers)


async def one(client: httpx.AsyncClient, url: str, headers: dict[str, str], prompt: str,
              max_tokens: int) -> Answer:
    body = {"model": "gemma-3-270m", "prompt": prompt, "max_tokens": max_tokens,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    start = time.perf_counter()
    texts: list[float] = []
    async with client.stream("POST", url + "/v1/completions", json=body,
                             headers=headers) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if event.get("choices") and event["choices"][0].get("text"):
                texts.append(time.perf_counter())
    end = time.perf_counter()
    assert texts, "no text in the stream"
    gaps = [b - a for a, b in itertools.pairwise(texts)] or [0.0]
    return Answer((texts[0] - start) * 1000, len(texts), statistics.median(gaps) * 1000,
                  (end - texts[-1]) * 1000)


async def run(url: str, headers: dict[str, str], clients: int, per_client: int,
              max_tokens: int) -> Run:
    async with httpx.AsyncClient(timeout=600) as client:
        async def worker(index: int) -> list[Answer]:
            return [await one(client, url, headers, PROMPTS[(index + i) % len(PROMPTS)],
                              max_tokens) for i in range(per_client)]

        start = time.perf_counter()
        results = await asyncio.gather(*(worker(i) for i in range(clients)))
        wall = time.perf_counter() - start
    return Run([a for answers in results for a in answers], wall)


@contextlib.contextmanager
def stack(root: Path, engine_counts: bool = False,
          engine_cpus: set[int] | None = None) -> Iterator[dict[str, Any]]:
    """The network's shape on free ports, as ``localnet up --json`` describes it."""
    if engine_cpus:
        # Everything started from here on inherits the rest; the engine is given its own.
        os.sched_setaffinity(0, os.sched_getaffinity(0) - engine_cpus)
    procs = Procs(root)
    node = DevNode(root / "node", str(raw_spec(plain_spec(
        root / "plain.json", chain_id="bench_net", slot_ms=1000, epoch_length=EPOCH_BLOCKS))),
        name="bench").start()
    try:
        engine_port, gw_port, w_port = free_port(), free_port(), free_port()
        engine_url = f"http://127.0.0.1:{engine_port}"
        (root / "engine.yml").write_text(yaml.safe_dump({
            "kind": "llamacpp", "listen_port": engine_port, "state_dir": str(root),
            "threads": len(engine_cpus) if engine_cpus else 2}))
        procs.start("engine", [str(BIN / "net-local-engine"), "--config",
                               str(root / "engine.yml")], cpus=engine_cpus)
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
    parser.add_argument("--engine-cpus", default="",
                        help="comma-separated CPUs for the engine alone (one thread each); the"
                        " benchmark, node, gateway and worker get the others")
    args = parser.parse_args()
    engine_cpus = {int(c) for c in args.engine_cpus.split(",") if c.strip()}
    if engine_cpus and (args.net is not None
                        or not engine_cpus < os.sched_getaffinity(0)):
        parser.error(f"--engine-cpus {args.engine_cpus!r}: give some but not all of this"
                     f" machine's CPUs {sorted(os.sched_getaffinity(0))}, on the benchmark's"
                     " own stack (not with --net)")
    if args.net is not None:
        measure(json.loads(args.net.read_text()), args)
        return
    with (tempfile.TemporaryDirectory(prefix="bench-inference-") as tmp,
          stack(Path(tmp), args.engine_counts, engine_cpus) as net):
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
        ttft = {n: [r.median("ttft_ms") for r in rs] for n, rs in runs.items()}
        rate = {n: [r.tokens / r.wall_s for r in rs] for n, rs in runs.items()}
        gap = {n: [r.median("gap_ms") for r in rs] for n, rs in runs.items()}
        tail = {n: [r.median("tail_ms") for r in rs] for n, rs in runs.items()}
        print(f"\n{clients} client(s); load average {load_start:.2f} -> {os.getloadavg()[0]:.2f};"
              " per path the median of its runs [middle half] (extremes):")
        for name in names:
            print(f"  {name:7} TTFT ms {spread(ttft[name])}; tokens/s {spread(rate[name])};"
                  f" gap ms {spread(gap[name])}; tail ms {spread(tail[name])}")
        for name in names[1:]:
            d_ttft = [g - d for g, d in zip(ttft[name], ttft["direct"], strict=True)]
            d_rate = [(g - d) / d * 100 for g, d in zip(rate[name], rate["direct"], strict=True)]
            d_gap = [g - d for g, d in zip(gap[name], gap["direct"], strict=True)]
            d_tail = [g - d for g, d in zip(tail[name], tail["direct"], strict=True)]
            print(f"  {name} - direct, per round: TTFT ms {spread(d_ttft, True)};"
                  f" tokens/s % {spread(d_rate, True)}; gap ms {spread(d_gap, True)};"
                  f" tail ms {spread(d_tail, True)}")


if __name__ == "__main__":
    main()

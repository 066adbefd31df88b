"""Benchmark: JSON-RPC throughput of one devnode over one WebSocket, and transactions per second.

Starts one authority (500 ms slots) on free loopback ports in a temporary directory and reports:
- chain_getBlockHash and state_getStorage requests/s, one request at a time (round trip bound)
  and with up to 64 requests in flight on the same connection;
- transfers/s accepted into the pool (author_submitExtrinsic, pre-signed, 64 in flight) and
  transfers/s included in blocks (first submission to the block holding the last one).

Usage: .venv/bin/python benchmarks/devnode_rpc.py [--requests 3000] [--transfers 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import websockets

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support
from tests.support.devnode import DevNode, plain_spec, raw_spec

ALICE_ACCOUNT_KEY = (
    "0x26aa394eea5630e07c48ae0c9558cef7b99d880ec681799c0cf30e8886371da9"
    "de1e86a9a8c739864cf3cc5ec2bea59fd43593c715fdd31c61141abd04a99fd6822c8558854ccde39a5684e7a56da27d"
)
SENDERS = ("Alice", "Bob", "Charlie", "Dave", "Eve", "Ferdie")


async def throughput(url: str, requests: list[tuple[str, list]], window: int) -> float:
    """Requests per second with at most ``window`` in flight on one connection."""
    async with websockets.connect(url, max_size=None) as ws:
        pending: set[int] = set()
        sent = done = 0
        started = time.perf_counter()
        while done < len(requests):
            while sent < len(requests) and len(pending) < window:
                method, params = requests[sent]
                await ws.send(
                    json.dumps({"jsonrpc": "2.0", "id": sent, "method": method, "params": params})
                )
                pending.add(sent)
                sent += 1
            reply = json.loads(await ws.recv())
            if "error" in reply:
                raise SystemExit(f"RPC error: {reply['error']}")
            pending.discard(reply["id"])
            done += 1
        return len(requests) / (time.perf_counter() - started)


def signed_transfers(url: str, count: int) -> list[str]:
    from substrateinterface import Keypair, SubstrateInterface

    s = SubstrateInterface(url=url)
    dest = Keypair.create_from_mnemonic(Keypair.generate_mnemonic()).ss58_address
    call = s.compose_call("Balances", "transfer_keep_alive", {"dest": dest, "value": 10**12})
    out = []
    for i in range(count):
        kp = Keypair.create_from_uri(f"//{SENDERS[i % len(SENDERS)]}")
        out.append(str(s.create_signed_extrinsic(call, kp, nonce=i // len(SENDERS)).data))
    s.close()
    return out


async def tps(node: DevNode, extrinsics: list[str]) -> tuple[float, float]:
    start_block = node.best()
    requests = [("author_submitExtrinsic", [x]) for x in extrinsics]
    started = time.perf_counter()
    accepted_rate = await throughput(node.ws, requests, 64)
    included = 0
    number = start_block
    last_block_time = time.perf_counter()
    while included < len(extrinsics) and time.perf_counter() - started < 300:
        best = node.best()
        while number < best:
            number += 1
            block = node.call("chain_getBlock", [node.call("chain_getBlockHash", [number])])
            included += len(block["block"]["extrinsics"])
            last_block_time = time.perf_counter()
        await asyncio.sleep(0.05)
    return accepted_rate, included / (last_block_time - started)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--transfers", type=int, default=1000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="devnode-rpc-bench-") as tmp:
        root = Path(tmp)
        spec = raw_spec(plain_spec(root / "spec.json", chain_id="bench_rpc", slot_ms=500))
        node = DevNode(root / "node", str(spec), "--no-prometheus", name="bench").start()
        try:
            node.wait_for(lambda: node.best() >= 2, what="two blocks")
            for label, reqs in (
                (
                    "chain_getBlockHash",
                    [("chain_getBlockHash", [i % 2]) for i in range(args.requests)],
                ),
                ("state_getStorage", [("state_getStorage", [ALICE_ACCOUNT_KEY])] * args.requests),
            ):
                one = asyncio.run(throughput(node.ws, reqs, 1))
                many = asyncio.run(throughput(node.ws, reqs, 64))
                print(
                    f"{label:20s} {one:8.0f} req/s sequential   {many:8.0f} req/s with 64 in flight"
                )
            extrinsics = signed_transfers(node.ws, args.transfers)
            accepted, included = asyncio.run(tps(node, extrinsics))
            print(
                f"transfers accepted into the pool: {accepted:.0f}/s;"
                f" included in blocks: {included:.0f}/s"
                f" ({args.transfers} transfers from {len(SENDERS)} senders, 500 ms slots)"
            )
        finally:
            node.stop()


if __name__ == "__main__":
    main()

"""Benchmark: a full node syncing 1,000 blocks from an authority (target: at least 200 blocks/s).

Starts its own nodes on free loopback ports in a temporary directory:
1. an authority on 20 ms slots authors BLOCKS blocks;
2. it restarts as a non-authoring node on the same database, so that only sync uses the CPU;
3. a fresh full node starts without peers; once it serves RPC it is given the server as a
   reserved peer (system_addReservedPeer) and the clock runs until it reaches the tip, polled
   every 20 ms (connection and handshake are included in the time).

Usage: .venv/bin/python benchmarks/devnode_sync.py [--blocks 1000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support
from tests.support.devnode import DevNode, plain_spec, raw_spec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=1000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="devnode-sync-bench-") as tmp:
        root = Path(tmp)
        spec = raw_spec(plain_spec(root / "spec.json", chain_id="bench_sync", slot_ms=20))
        author = DevNode(root / "author", str(spec), "--no-prometheus", name="author").start()
        try:
            started = time.monotonic()
            author.wait_for(
                lambda: author.best() >= args.blocks, timeout=600, what="blocks", interval=0.5
            )
            authored = time.monotonic() - started
        finally:
            author.stop()
        print(f"authored {args.blocks} blocks on 20 ms slots in {authored:.1f} s")
        server = DevNode(
            root / "author", str(spec), "--no-prometheus", name="server", validator_key=None
        )
        server.start()
        full = DevNode(root / "full", str(spec), "--no-prometheus", name="full", validator_key=None)
        try:
            target = server.best()
            full.start()
            bootnode = server.bootnode()
            t0 = time.monotonic()
            full.call("system_addReservedPeer", [bootnode])
            full.wait_for(
                lambda: full.best() >= target, timeout=300, what="the sync", interval=0.02
            )
            seconds = time.monotonic() - t0
            same = full.call("chain_getBlockHash", [target]) == server.call(
                "chain_getBlockHash", [target]
            )
            print(
                f"synced {target} blocks in {seconds:.2f} s: {target / seconds:.0f} blocks/s"
                f" (tip hash matches: {same}; target: at least 200 blocks/s)"
            )
        finally:
            full.stop()
            server.stop()


if __name__ == "__main__":
    main()

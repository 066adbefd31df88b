"""A node that hangs, not dies: how soon each service's /ready turns red and green again
(issue 29; the faucet's figures come from faucet_shared.py, which hangs the node itself).

    python benchmarks/hung_node.py [--hang-s 30]

Self-contained on free loopback ports: a development node (``--dev``), and behind one real TCP
proxy that holds every byte while hung (tests/services/tcp_proxy.py): ``net-attestation``,
``net-explorer``, ``net-indexer-processor``, ``net-indexer`` (SQLite) and ``net-gateway``
(SQLite, with its default chain timeouts: 5 s a call, a 20 s old chain view, a read every 2 s).
The proxy hangs for ``--hang-s`` seconds while the node goes on; printed: the seconds until each
/ready is 503, the seconds from the end of the hang until each is 200 again, and whether
anything was lost (the index at the chain's head with its hash, a report issued before verifying
again, the gateway's chain view back on the chain's current epoch).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.services.*

from tests.services.explorer.processes import run_service
from tests.services.gateway.harness import current_epoch, start_gateway
from tests.services.indexer.harness import Indexer
from tests.services.tcp_proxy import TcpProxy
from tests.support.devnode import rpc as rpc_call
from tests.support.devnode import run_devnode


def status(url: str) -> int:
    try:
        return httpx.get(url + "/ready", timeout=30).status_code
    except httpx.HTTPError:
        return 0


def until(urls: dict[str, str], code: int, since: float, limit: float = 120) -> dict[str, float]:
    seen: dict[str, float] = {}
    while len(seen) < len(urls) and time.monotonic() - since < limit:
        for name, url in urls.items():
            if name not in seen and status(url) == code:
                seen[name] = time.monotonic() - since
        time.sleep(0.2)
    return seen


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hang-s", type=float, default=30.0)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-hung-"))
    seed = tmp / "seed"
    seed.write_text("bench-hung-node-seed-3f9a1c7e\n")
    seed.chmod(0o600)
    with contextlib.ExitStack() as stack:
        (tmp / "node").mkdir()
        node = stack.enter_context(run_devnode(tmp / "node", ["--dev"]))
        target = urllib.parse.urlsplit(node.ws)
        proxy = TcpProxy((str(target.hostname), int(target.port or 80)))
        stack.callback(proxy.close)
        ws = proxy.url.replace("http://", "ws://")
        attestation = stack.enter_context(run_service("attestation", tmp / "attestation", {
            "rpc_url": ws, "mock_root_seed_file": str(seed)}))
        explorer = stack.enter_context(run_service("explorer", tmp / "explorer", {
            "rpc_url": ws, "attestation_url": attestation.url, "anchor_cache_s": 0}))
        ix = Indexer(tmp / "indexer", ws, f"sqlite:///{tmp / 'index.db'}").start()
        stack.callback(ix.stop)
        # The harness's short loops for the gateway's tests, back to the defaults for the chain
        # (its call timeout and view age are the defaults already).
        gw = start_gateway(tmp / "gateway", node, f"sqlite:///{tmp / 'gateway.db'}",
                           settle=False, extra={"rpc_url": ws, "chain_poll_s": 2.0})
        stack.callback(gw.proc.stop)
        urls = {"attestation": attestation.url, "explorer": explorer.url,
                "indexer-processor": f"http://127.0.0.1:{ix.processor_port}",
                "indexer": ix.url, "gateway": gw.url}
        started = time.monotonic()
        assert len(until(urls, 200, started)) == len(urls), "not every service got ready"
        report = httpx.post(attestation.url + "/v1/attest", json={"operator_id": "bench"},
                            timeout=30).json()
        proxy.hang.set()
        hung = time.monotonic()
        red = until(urls, 503, hung)
        time.sleep(max(0.0, args.hang_s - (time.monotonic() - hung)))
        proxy.hang.clear()
        cleared = time.monotonic()
        green = until(urls, 200, cleared)
        head = int(rpc_call(node.http, "chain_getHeader", [])["number"], 16)
        index = ix.wait_height(head, timeout=120)
        same = index["hash"] == rpc_call(node.http, "chain_getBlockHash", [index["height"]])
        valid = httpx.post(attestation.url + "/v1/verify", json=report,
                           timeout=30).json()["valid"]
        epoch = current_epoch(node)
        gw_epoch = gw.workers()["current_epoch"]
    print(f"node hung {args.hang_s:g} s behind a TCP proxy (the node went on)")
    print(f"{'service':20} {'red after s':>12} {'green after s':>14}")
    for name in urls:
        nan = float("nan")
        print(f"{name:20} {red.get(name, nan):12.1f} {green.get(name, nan):14.1f}")
    print(f"indexed to the chain's head #{head} with its hash: {same}; report issued before"
          f" verifies again: {valid}; gateway's chain view at epoch {gw_epoch} (chain:"
          f" {epoch})")
    # An epoch may turn between the two reads.
    current = gw_epoch is not None and epoch - 1 <= gw_epoch <= epoch
    ok = len(red) == len(green) == len(urls) and same and valid and current
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

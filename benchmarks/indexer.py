"""Benchmark: the indexer's catch-up speed against the raw RPC fetch rate (target: at least half),
the GraphQL latency of indexStatus and a paginated events query, and (--reset) the time until
the indexer is ready on a new genesis after a reset.

Starts its own nodes on free loopback ports in a temporary directory (or --keep DIR, reused):
1. an authority on 10 ms slots authors BLOCKS blocks while transfers (pre-signed, sequential
   nonces) are submitted in bursts, so that the blocks carry transactions and events;
2. it restarts as a non-authoring node on the same database, so that only serving uses its CPU;
3. the ceiling: every block's hash, body, System.Events and Timestamp.Now fetched over one
   WebSocket with the indexer's own batching (JSON-RPC batches of BATCH blocks, FETCH_AHEAD
   batches in flight), no decoding, no storage (measured before and after the catch-up; the
   ratio uses their mean);
4. the indexer's processor catches up from genesis into a fresh database (SQLite by default,
   --postgres for a throwaway PostgreSQL server started here, --database-url for another one):
   fetch, decode with the metadata, bulk insert; --runs times, each between two raw fetches;
5. net-indexer serves that database; indexStatus, events(first: 50, after: cursor), filtered
   transfers pages (recipient and block range; either side of a rare account) and totalCount
   (a rare account's transfers by from, to and either side, a busy account's, every event) are
   asked for REQUESTS times each (p50 and p95);
6. --extra-transfers N (default 400,000) transfers between five busy accounts are added to the
   index, and the filtered pages and counts of 5. asked for again: the rare account is then
   rare among many, which shows whether its page and counts walk its index or the list.

--reset N instead: a node on 1 s slots (the local network's) with the processor and the API on
it; N times the node is stopped and a node of another genesis (another chain spec) started on
the same port, as a reset does; the API's /ready is polled every 50 ms. Figures per reset: the
new node answering after the old one stopped (the network's part), and the API's /ready on the
new genesis after the new node answers (the indexer's part).

--subscription N instead: a node on 1 s slots with the processor and the API; the delay from the
node's new-heads notification of a block to the API's newBlocks message for it, over N blocks,
and to the transfers(filter) message of a transfer in it, over N/4 transfers to a fresh account
made with substrate-interface.

Usage: .venv/bin/python benchmarks/indexer.py [--blocks 10000] [--keep DIR] [--runs 3]
           [--extra-transfers 400000]
           [--postgres | --database-url URL] [--reset N | --subscription N]
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
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.services.indexer.harness

import websockets
from substrateinterface import Keypair

from ops_tools.chain.aio import RpcClient
from ops_tools.services.common.db import Database
from ops_tools.services.common.migrations import migrate
from ops_tools.services.indexer.app import MIGRATIONS, VERSION_TABLE
from ops_tools.services.indexer.processor import (
    EVENTS_KEY,
    TIMESTAMP_KEY,
    Processor,
    ProcessorOptions,
)
from tests.conftest import free_port
from tests.services.indexer.harness import Indexer
from tests.services.postgres import running_postgres
from tests.support.devnode import DevNode, plain_spec, raw_spec

BATCH, FETCH_AHEAD, REQUESTS = 100, 4, 200


def author_chain(root: Path, blocks: int) -> Path:
    spec = root / "spec-raw.json"
    if spec.exists() and (root / "done").exists():
        return spec
    spec = raw_spec(plain_spec(root / "spec.json", chain_id="bench_indexer", slot_ms=10))
    author = DevNode(root / "author", str(spec), "--no-prometheus", name="author").start()
    stop = threading.Event()
    sent = [0]

    def submitter() -> None:
        from substrateinterface import Keypair, SubstrateInterface

        alice = Keypair.create_from_uri("//Alice", ss58_format=42)
        dests = [Keypair.create_from_uri(f"//bench{i}", ss58_format=42).ss58_address
                 for i in range(50)]
        substrate = SubstrateInterface(url=author.http, ss58_format=42)
        nonce = 0
        while not stop.is_set():
            for _ in range(10):
                call = substrate.compose_call("Balances", "transfer_keep_alive",
                                              {"dest": dests[nonce % 50], "value": 10**12})
                xt = substrate.create_signed_extrinsic(call=call, keypair=alice, nonce=nonce)
                try:
                    author.call("author_submitExtrinsic", [str(xt.data)])
                    nonce += 1
                except RuntimeError:
                    nonce = int(author.call("system_accountNextIndex", [alice.ss58_address]))
            sent[0] = nonce
            stop.wait(0.5)

    thread = threading.Thread(target=submitter, daemon=True)
    try:
        started = time.monotonic()
        thread.start()
        author.wait_for(lambda: author.best() >= blocks, timeout=3600, what="blocks",
                        interval=1.0)
        stop.set()
        thread.join(30)
        print(f"authored {author.best()} blocks on 10 ms slots in "
              f"{time.monotonic() - started:.0f} s with {sent[0]} transfers")
    finally:
        author.stop()
    (root / "done").write_text("ok")
    return spec


async def raw_fetch(ws_url: str, target: int) -> tuple[float, int]:
    """Seconds to fetch blocks 0..target with their events, and the bytes of events fetched."""
    event_bytes = 0
    async with RpcClient(ws_url) as rpc:
        t0 = time.monotonic()

        async def batch(lo: int, hi: int) -> int:
            hashes = await rpc.batch([("chain_getBlockHash", [n]) for n in range(lo, hi + 1)])
            calls = []
            for h in hashes:
                calls += [("chain_getBlock", [h]), ("state_getStorage", [EVENTS_KEY, h]),
                          ("state_getStorage", [TIMESTAMP_KEY, h])]
            answers = await rpc.batch(calls)
            return sum(len(a or "") for a in answers[1::3])

        ranges = [(lo, min(lo + BATCH - 1, target)) for lo in range(0, target + 1, BATCH)]
        pending: list[asyncio.Task[int]] = []
        for rng in ranges:
            pending.append(asyncio.create_task(batch(*rng)))
            if len(pending) >= FETCH_AHEAD:
                event_bytes += await pending.pop(0)
        for task in pending:
            event_bytes += await task
        return time.monotonic() - t0, event_bytes


async def catch_up(ws_url: str, db: Database, target: int) -> float:
    processor = Processor(ProcessorOptions(ws_url, batch_size=BATCH, fetch_ahead=FETCH_AHEAD),
                          db)
    t0 = time.monotonic()
    task = asyncio.create_task(processor.run())
    while True:
        await asyncio.wait_for(processor.synced.wait(), 3600)
        processor.synced.clear()
        with db.session() as s:
            height = s.connection().exec_driver_sql(
                "SELECT height FROM indexer_networks WHERE active").scalar()
        if height is not None and height >= target:
            break
    seconds = time.monotonic() - t0
    processor.stop()
    await task
    return seconds


def latency(ix: Indexer, query: str, variables: dict) -> tuple[float, float]:
    times = []
    body = json.dumps({"query": query, "variables": variables}).encode()
    for _ in range(REQUESTS):
        req = urllib.request.Request(ix.url + "/graphql", body,  # noqa: S310 - loopback
                                     {"Content-Type": "application/json"})
        t0 = time.perf_counter()
        with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310 - loopback
            answer = json.loads(resp.read())
        times.append((time.perf_counter() - t0) * 1000)
        assert not answer.get("errors"), answer
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


def filtered_figures(ix: Indexer, label: str = "") -> None:
    """A filtered transfers page (recipient and block range) and counts: one account's
    transfers (exact, under the cap) and every event (past the cap on a long chain); the rare
    account's (//bench0) counts by side and its either-side page, and a busy account's count
    (past the cap once ``add_transfers`` ran)."""
    dest = Keypair.create_from_uri("//bench0", ss58_format=42).ss58_address
    busy = Keypair.create_from_uri("//busy0", ss58_format=42).ss58_address
    height = ix.status()["height"]
    page_q = ("query($a: String!, $lo: Int!) { transfers(first: 50, filter: {to: {equalTo: $a},"
              " blockNumber: {greaterThanOrEqualTo: $lo}}) { edges { node { from to amount "
              "blockNumber extrinsicHash } } } }")
    variables = {"a": dest, "lo": height // 4}
    got = len(ix.data(page_q, variables)["transfers"]["edges"])
    p50, p95 = latency(ix, page_q, variables)
    print(f"GraphQL{label} transfers(first: 50, filter: to + blockNumber >= {height // 4}) "
          f"({got} rows): p50 {p50:.1f} ms, p95 {p95:.1f} ms ({REQUESTS} requests)")
    either_q = ("query($a: String!) { transfers(first: 50, filter: {account: {equalTo: $a}}) { "
                "edges { node { from to amount blockNumber } } } }")
    got = len(ix.data(either_q, {"a": dest})["transfers"]["edges"])
    p50, p95 = latency(ix, either_q, {"a": dest})
    print(f"GraphQL{label} transfers(first: 50, filter: account, rare) ({got} rows): "
          f"p50 {p50:.1f} ms, p95 {p95:.1f} ms ({REQUESTS} requests)")
    count_q = ("query($a: String!) { transfers(filter: {%s: {equalTo: $a}}) { totalCount "
               "totalCountCapped } }")
    for what, query, args in (
            ("transfers(filter: account).totalCount", count_q % "account", {"a": dest}),
            ("transfers(filter: from, rare).totalCount", count_q % "from", {"a": dest}),
            ("transfers(filter: to, rare).totalCount", count_q % "to", {"a": dest}),
            ("transfers(filter: account, busy).totalCount", count_q % "account", {"a": busy}),
            ("events.totalCount (every event)",
             "{ events { totalCount totalCountCapped } }", {})):
        (conn,) = ix.data(query, args).values()
        p50, p95 = latency(ix, query, args)
        print(f"GraphQL{label} {what} = {conn['totalCount']}"
              f"{' (capped)' if conn['totalCountCapped'] else ''}: p50 {p50:.1f} ms, "
              f"p95 {p95:.1f} ms ({REQUESTS} requests)")


def add_transfers(url: str, count: int) -> None:
    """``count`` transfers added to the index between five busy accounts (//busy0..4) that the
    chain's own transfers do not touch, spread over its blocks after their events: a short
    chain's few hundred transfers do not show whether a rare account's page and counts walk its
    index or the list, a few hundred thousand do. Bulk inserts, as the processor's."""
    from ops_tools.services.indexer.tables import TransferRow

    busy = [Keypair.create_from_uri(f"//busy{i}", ss58_format=42).ss58_address
            for i in range(5)]
    db = Database(url)
    t0 = time.monotonic()
    with db.session(write=True) as s:
        c = s.connection()
        net, height = c.exec_driver_sql(
            "SELECT id, height FROM indexer_networks WHERE active").one()
        per_block = -(-count // (height + 1))
        chunk = 50_000
        for lo in range(0, count, chunk):
            c.execute(TransferRow.__table__.insert(), [
                {"network_id": net, "block_number": i // per_block,
                 "event_idx": 100_000 + i % per_block, "extrinsic_idx": None,
                 "extrinsic_hash": None, "sender": busy[i % 5],
                 "recipient": busy[(i + 1) % 5], "amount": "1"}
                for i in range(lo, min(lo + chunk, count))])
    if db.dialect == "postgresql":
        with db.engine.connect() as c:
            c.exec_driver_sql("ANALYZE indexer_transfers")  # autovacuum's, without the wait
            c.commit()
    db.dispose()
    print(f"added {count} transfers between //busy0..4 in {time.monotonic() - t0:.1f} s")


def load() -> str:
    return "load average " + " / ".join(f"{x:.1f}" for x in os.getloadavg())


def catch_up_figures(root: Path, tmp: Path, blocks: int, urls: list[str],
                     extra: int) -> None:
    """One catch-up per URL (each an empty database), each between two raw fetches: the
    machine's load moves both rates, so each catch-up is compared with the mean of the raw
    fetches just before and after it."""
    spec = author_chain(root, blocks)
    server = DevNode(root / "author", str(spec), "--no-prometheus", name="server",
                     validator_key=None).start()
    try:
        target = server.best()
        seconds, event_bytes = asyncio.run(raw_fetch(server.ws, target))
        raw_before = (target + 1) / seconds
        print(f"raw RPC fetch: {target + 1} blocks and their events ({event_bytes // 2} "
              f"bytes of events) in {seconds:.1f} s: {raw_before:.0f} blocks/s ({load()})")
        ratios = []
        for url in urls:
            db = Database(url)
            migrate(db, MIGRATIONS, version_table=VERSION_TABLE)
            seconds = asyncio.run(catch_up(server.ws, db, target))
            during = load()
            with db.session() as s:
                events = s.connection().exec_driver_sql(
                    "SELECT count(*) FROM indexer_events").scalar()
                transfers = s.connection().exec_driver_sql(
                    "SELECT count(*) FROM indexer_transfers").scalar()
            db.dispose()
            rate = (target + 1) / seconds
            after, _ = asyncio.run(raw_fetch(server.ws, target))
            raw_after = (target + 1) / after
            raw_rate = (raw_before + raw_after) / 2
            ratios.append(rate / raw_rate)
            print(f"indexer catch-up ({db.dialect}): {target + 1} blocks, {events} events, "
                  f"{transfers} transfers in {seconds:.1f} s: {rate:.0f} blocks/s, "
                  f"{events / seconds:.0f} events/s = {rate / raw_rate:.0%} of the raw fetch "
                  f"rate around it ({raw_before:.0f} before, {raw_after:.0f} after) "
                  f"(target: at least 50%) ({during})")
            raw_before = raw_after
        if len(ratios) > 1:
            print(f"catch-up / raw fetch over {len(ratios)} runs: median "
                  f"{statistics.median(ratios):.0%}, lowest {min(ratios):.0%}")
        url = urls[-1]
        ix = Indexer(tmp / "api", server.ws, url)
        ix.start_api()
        try:
            status_q = "{ indexStatus { height lag genesisHash } }"
            p50, p95 = latency(ix, status_q, {})
            print(f"GraphQL indexStatus: p50 {p50:.1f} ms, p95 {p95:.1f} ms "
                  f"({REQUESTS} requests)")
            page = ix.data("{ events(first: 50) { pageInfo { endCursor } } }")
            cursor = page["events"]["pageInfo"]["endCursor"]
            events_q = ("query($a: String) { events(first: 50, after: $a) { edges { node { "
                        "blockNumber index pallet name args } cursor } pageInfo { "
                        "hasNextPage endCursor } } }")
            p50, p95 = latency(ix, events_q, {"a": cursor})
            print(f"GraphQL events(first: 50, after): p50 {p50:.1f} ms, p95 {p95:.1f} ms "
                  f"({REQUESTS} requests)")
            filtered_figures(ix)
            if extra:
                add_transfers(url, extra)
                filtered_figures(ix, f" (+{extra} transfers)")
        finally:
            ix.stop()
    finally:
        server.stop()


def _ready_on(ix: Indexer, genesis: str) -> bool:
    status, body = ix.http("GET", "/ready")
    checks = body.get("checks", []) if isinstance(body, dict) else []
    return status == 200 and any(c["name"] == "chain" and c["detail"] == genesis
                                 for c in checks)


def reset_figures(tmp: Path, resets: int, url: str | None) -> None:
    specs = [raw_spec(plain_spec(tmp / f"net{i}.json", chain_id="bench_reset", slot_ms=1000,
                                 epoch_length=10 + i)) for i in range(resets + 1)]
    node = DevNode(tmp / "net0", str(specs[0]), name="net0").start()
    port = node.rpc_port
    ix = Indexer(tmp / "indexer", node.ws, url or f"sqlite:///{tmp / 'reset-indexer.db'}")
    rows = []
    try:
        ix.start()
        genesis = node.call("chain_getBlockHash", [0])
        node.wait_for(lambda: node.best() >= 5, 60, "five blocks")
        ix.wait_for(lambda: _ready_on(ix, genesis), 60, "the indexer ready on the first chain")
        for i in range(1, resets + 1):
            stopped = time.monotonic()
            node.stop()
            node = DevNode(tmp / f"net{i}", str(specs[i]), name=f"net{i}")
            node.args[node.args.index("--rpc-port") + 1] = str(port)
            node.rpc_port = port
            node.start()
            answered = time.monotonic()
            genesis = node.call("chain_getBlockHash", [0])
            deadline = answered + 120
            while not _ready_on(ix, genesis):
                if time.monotonic() > deadline:
                    raise SystemExit(f"the indexer was not ready on {genesis} within 120 s:\n"
                                     + ix.logs())
                time.sleep(0.05)
            ready = time.monotonic()
            rows.append((answered - stopped, ready - answered, ready - stopped))
            print(f"reset {i}: new node answers {answered - stopped:.1f} s after the old one "
                  f"stopped; indexer /ready on the new genesis {ready - answered:.2f} s after "
                  f"that ({ready - stopped:.1f} s in all; {load()})")
            node.wait_for(lambda n=node: n.best() >= 3, 60, "blocks on the new chain")
        nets = ix.data("{ indexStatus { resetCount genesisHash } }")["indexStatus"]
        assert nets["resetCount"] == resets and nets["genesisHash"] == genesis, nets
        parts = list(zip(*rows, strict=True))
        print(f"median of {resets}: node {statistics.median(parts[0]):.1f} s, indexer "
              f"{statistics.median(parts[1]):.2f} s (max {max(parts[1]):.2f} s), in all "
              f"{statistics.median(parts[2]):.1f} s")
    finally:
        ix.stop()
        node.stop()


def subscription_figures(tmp: Path, blocks: int, url: str | None) -> None:
    """The delay from the node announcing a new block (its new-heads subscription: the block is
    imported) to the indexer's ``newBlocks`` message for it, and to the ``transfers`` message
    of a transfer in it (to a fresh account, made with substrate-interface), all seen by this
    process over WebSocket, on a chain of 1 s slots (the local network's)."""
    spec = raw_spec(plain_spec(tmp / "sub.json", chain_id="bench_sub", slot_ms=1000))
    node = DevNode(tmp / "sub", str(spec), name="sub").start()
    ix = Indexer(tmp / "sub-indexer", node.ws, url or f"sqlite:///{tmp / 'sub-indexer.db'}")
    try:
        ix.start()
        ix.wait_height(2)
        imported: dict[int, float] = {}
        delays: list[float] = []

        async def heads() -> None:
            async with websockets.connect(node.ws) as ws:
                await ws.send(json.dumps({"id": 1, "jsonrpc": "2.0",
                                          "method": "chain_subscribeNewHeads", "params": []}))
                while True:
                    msg = json.loads(await ws.recv())
                    if msg.get("method") == "chain_newHead":
                        number = int(msg["params"]["result"]["number"], 16)
                        imported.setdefault(number, time.monotonic())

        dest = Keypair.create_from_mnemonic(Keypair.generate_mnemonic(), ss58_format=42)
        transfer_delays: list[float] = []
        transfers = max(blocks // 4, 5)

        async def messages() -> None:
            url_ws = ix.url.replace("http://", "ws://") + "/graphql"
            async with websockets.connect(url_ws, subprotocols=["graphql-transport-ws"]) as ws:
                await ws.send(json.dumps({"type": "connection_init"}))
                await ws.recv()
                await ws.send(json.dumps({"id": "b", "type": "subscribe", "payload": {
                    "query": "subscription { newBlocks { number } }"}}))
                await ws.send(json.dumps({"id": "t", "type": "subscribe", "payload": {
                    "query": "subscription($a: String!) { transfers(filter: {to: {equalTo: "
                             "$a}}) { blockNumber } }", "variables": {"a": dest.ss58_address}}}))
                sender = asyncio.create_task(asyncio.to_thread(send_transfers))
                while len(delays) < blocks or len(transfer_delays) < transfers:
                    msg = json.loads(await ws.recv())
                    data = msg["payload"]["data"]
                    if msg["id"] == "b":
                        number = data["newBlocks"]["number"]
                        target = delays
                    else:
                        number = data["transfers"]["blockNumber"]
                        target = transfer_delays
                    if number in imported:
                        target.append((time.monotonic() - imported[number]) * 1000)
                await sender

        def send_transfers() -> None:
            """Made with substrate-interface, each waited for until included, as a user would."""
            from substrateinterface import SubstrateInterface

            alice = Keypair.create_from_uri("//Alice", ss58_format=42)
            substrate = SubstrateInterface(url=node.ws, ss58_format=42)
            try:
                for _ in range(transfers):
                    call = substrate.compose_call("Balances", "transfer_keep_alive", {
                        "dest": dest.ss58_address, "value": 10**12})
                    xt = substrate.create_signed_extrinsic(call=call, keypair=alice)
                    assert substrate.submit_extrinsic(xt, wait_for_inclusion=True).is_success
            finally:
                substrate.close()

        async def run() -> None:
            watcher = asyncio.create_task(heads())
            try:
                await asyncio.wait_for(messages(), blocks * 5 + 60)
            finally:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher

        asyncio.run(run())
        kind = "postgresql" if url else "sqlite"
        for what, seen in (("newBlocks", delays), ("transfers(filter: to a fresh account)",
                                                   transfer_delays)):
            seen.sort()
            print(f"subscription {what} ({kind}): delay from the node's new head to the "
                  f"message over {len(seen)} messages: p50 {statistics.median(seen):.0f} ms, "
                  f"p95 {seen[max(int(len(seen) * 0.95) - 1, 0)]:.0f} ms, max {seen[-1]:.0f} "
                  f"ms (target p95 <= 1500 ms; {load()})")
    finally:
        ix.stop()
        node.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=10_000)
    ap.add_argument("--keep", type=Path, help="directory for the chain, reused when present")
    db = ap.add_mutually_exclusive_group()
    db.add_argument("--database-url", help="default: a fresh SQLite file")
    db.add_argument("--postgres", action="store_true",
                    help="a throwaway PostgreSQL server (Debian's binaries, loopback, free port)")
    ap.add_argument("--reset", type=int, default=0, metavar="N",
                    help="measure N resets instead of the catch-up")
    ap.add_argument("--subscription", type=int, default=0, metavar="N",
                    help="measure the newBlocks subscription's delay over N blocks instead")
    ap.add_argument("--extra-transfers", type=int, default=400_000, metavar="N",
                    help="after the chain's figures, N transfers between busy accounts are "
                         "added to the index and the filtered figures taken again (0: not)")
    ap.add_argument("--runs", type=int, default=3,
                    help="catch-ups, each into an empty database (1 with --database-url)")
    args = ap.parse_args()
    if args.database_url and args.runs != 1 and not args.reset:
        raise SystemExit("--runs: each run needs an empty database; with --database-url "
                         "pass --runs 1")
    with tempfile.TemporaryDirectory(prefix="indexer-bench-") as tmp_name:
        tmp = Path(tmp_name)
        root = args.keep or tmp
        root.mkdir(parents=True, exist_ok=True)
        with contextlib.ExitStack() as stack:
            urls = [args.database_url] if args.database_url else [
                f"sqlite:///{tmp / f'bench-indexer-{i}.db'}" for i in range(args.runs)]
            if args.postgres:
                # fsync=off, as the test suites' server: commits cost less than on a durable one.
                server = stack.enter_context(running_postgres(tmp / "pg", free_port()))
                urls = [server.create_database(f"bench_indexer_{i}")
                        for i in range(max(args.runs, 1))]
            if args.subscription:
                subscription_figures(tmp, args.subscription,
                                     None if urls[0].startswith("sqlite") else urls[0])
            elif args.reset:
                reset_figures(tmp, args.reset, None if urls[0].startswith("sqlite") else urls[0])
            else:
                catch_up_figures(root, tmp, args.blocks, urls, args.extra_transfers)


if __name__ == "__main__":
    main()

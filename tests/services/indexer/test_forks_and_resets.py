"""The indexer left running through a fork and through a reset of the chain under it.

Fork: two authorities of one chain author separately (not connected), the indexer follows the
one with the shorter chain; once connected, that node switches to the longer chain and the
indexer must roll back the blocks of the losing branch. Reset: the node is replaced by one of
another genesis on the same address; the indexer archives the old network and indexes the new
one from its genesis, without being touched.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

import pytest
import websockets
from substrateinterface import Keypair

from tests.services.indexer.chain_ops import TOKEN, fresh_account, submit
from tests.services.indexer.harness import Indexer
from tests.support.devnode import DevNode, plain_spec, raw_spec

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

ALICE = Keypair.create_from_uri("//Alice", ss58_format=42)
BLOCKS_Q = """query($after: String) { blocks(first: 100, after: $after) {
  edges { node { number hash parentHash } } pageInfo { hasNextPage endCursor } } }"""


def indexed_blocks(ix: Indexer) -> dict[int, str]:
    out: dict[int, str] = {}
    after = None
    while True:
        page = ix.data(BLOCKS_Q, {"after": after})["blocks"]
        out.update({e["node"]["number"]: e["node"]["hash"] for e in page["edges"]})
        if not page["pageInfo"]["hasNextPage"]:
            return out
        after = page["pageInfo"]["endCursor"]


def test_blocks_of_the_losing_branch_are_rolled_back(tmp_path):
    spec = raw_spec(plain_spec(tmp_path / "two.json", chain_id="fork_net", slot_ms=300,
                               authorities=("Alice", "Bob")))
    alice = DevNode(tmp_path / "alice", str(spec), name="alice", validator_key="alice")
    bob = DevNode(tmp_path / "bob", str(spec), name="bob", validator_key="bob")
    ix = Indexer(tmp_path / "indexer", bob.ws, f"sqlite:///{tmp_path / 'indexer.db'}")
    try:
        alice.start()
        alice.wait_for(lambda: alice.best() >= 20, 60, "Alice's branch to reach #20")
        bob.start()
        bob.wait_for(lambda: bob.best() >= 4, 60, "Bob's branch to reach #4")
        ix.start()
        ix.wait_height(4)
        losing = indexed_blocks(ix)
        assert losing[1] != alice.call("chain_getBlockHash", [1])  # two branches indeed

        bob.call("system_addReservedPeer", [alice.bootnode()])
        bob.wait_for(lambda: bob.call("chain_getBlockHash", [1])
                     == alice.call("chain_getBlockHash", [1]), 60, "Bob to adopt Alice's chain")

        def on_alices_chain() -> bool:
            st = ix.status()
            if not st or st["height"] < 20:
                return False
            blocks = indexed_blocks(ix)
            return all(alice.call("chain_getBlockHash", [n]) == h for n, h in blocks.items()
                       if n <= min(st["height"], alice.best()))
        ix.wait_for(on_alices_chain, 90, "the index to follow Alice's chain")

        for number, block_hash in losing.items():
            if number == 0:
                continue
            found = ix.data("query($h: String) { block(hash: $h) { number } }", {"h": block_hash})
            assert found["block"] is None, f"block #{number} of the losing branch is still there"
        blocks = indexed_blocks(ix)
        assert sorted(blocks) == list(range(len(blocks)))  # no gaps
        st = ix.status()
        assert st["finalizedHeight"] <= bob.finalized()
        assert "rolled back" in (tmp_path / "indexer" / "processor.log").read_text()
    finally:
        ix.stop()
        bob.stop()
        alice.stop()


def test_a_finalized_block_replaced_on_the_same_genesis_is_reported_and_followed(tmp_path):
    # The node's history is replaced under the index without a new genesis: the same chain
    # spec started again on an empty database (a reset that kept the chain spec), so every
    # block above the genesis, finalized ones included, is another block.
    spec = raw_spec(plain_spec(tmp_path / "one.json", chain_id="settled_net", slot_ms=300))
    first = DevNode(tmp_path / "first", str(spec), name="first").start()
    second = _on_port(DevNode(tmp_path / "second", str(spec), name="second"), first.rpc_port)
    ix = Indexer(tmp_path / "indexer", first.ws, f"sqlite:///{tmp_path / 'indexer.db'}")
    try:
        ix.start()
        ix.wait_for(lambda: (ix.status() or {}).get("finalizedHeight", -1) >= 3, 60,
                    "the index to record finalized blocks")
        # The finalized height first: the blocks read after it reach at least that far (read
        # the other way round, the index may finalize a block past those read meanwhile).
        finalized = ix.status()["finalizedHeight"]
        replaced = indexed_blocks(ix)
        first.stop()
        second.start()
        genesis = second.call("chain_getBlockHash", [0])
        assert genesis == replaced[0]  # the same network: no reset for the indexer
        second.wait_for(lambda: second.best() >= finalized + 2, 60, "the second history")
        assert second.call("chain_getBlockHash", [finalized]) != replaced[finalized]

        def follows_second() -> bool:
            st = ix.status()
            if not st or st["height"] < finalized + 2:
                return False
            return all(second.call("chain_getBlockHash", [n]) == h
                       for n, h in indexed_blocks(ix).items() if n <= st["height"])
        ix.wait_for(follows_second, 90, "the index to follow the second history")
        log = (tmp_path / "indexer" / "processor.log").read_text()
        assert "finality violated" in log, log[-3000:]
        assert "recorded as finalized, is no longer on the node's chain" in log
        st = ix.status()
        assert st["resetCount"] == 0 and st["genesisHash"] == genesis
        assert st["finalizedHeight"] <= second.finalized()
        if st["finalizedHeight"] >= 0:
            assert st["finalizedHash"] == second.call("chain_getBlockHash",
                                                      [st["finalizedHeight"]])
        for number, block_hash in replaced.items():
            if number > 0:
                assert ix.data("query($h: String) { block(hash: $h) { number } }",
                               {"h": block_hash})["block"] is None, number
    finally:
        ix.stop()
        second.stop()
        first.stop()


def test_subscribers_are_told_which_items_a_rollback_withdrew(tmp_path):
    """A transfer on the branch the indexer follows reaches a subscriber; that branch then
    loses, and the subscriber gets the transfer and the branch's blocks again with removed:
    true, newest first, before the winning branch's blocks from the fork point on."""
    spec = raw_spec(plain_spec(tmp_path / "two.json", chain_id="fork_sub_net", slot_ms=300,
                               authorities=("Alice", "Bob")))
    alice = DevNode(tmp_path / "alice", str(spec), name="alice", validator_key="alice")
    bob = DevNode(tmp_path / "bob", str(spec), name="bob", validator_key="bob")
    ix = Indexer(tmp_path / "indexer", bob.ws, f"sqlite:///{tmp_path / 'indexer.db'}")
    dest = fresh_account().ss58_address
    try:
        alice.start()
        alice.wait_for(lambda: alice.best() >= 30, 90, "Alice's branch to reach #30")
        bob.start()
        ix.start()
        ix.wait_height(2)

        async def run() -> dict[str, list[dict]]:
            url = ix.url.replace("http://", "ws://") + "/graphql"
            got: dict[str, list[dict]] = {"t": [], "b": []}
            async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:
                await ws.send(json.dumps({"type": "connection_init"}))
                assert json.loads(await ws.recv())["type"] == "connection_ack"
                await ws.send(json.dumps({"id": "t", "type": "subscribe", "payload": {
                    "query": "subscription($a: String!) { transfers(filter: {to: {equalTo: "
                             "$a}}) { to blockNumber extrinsicHash removed } }",
                    "variables": {"a": dest}}}))
                await ws.send(json.dumps({"id": "b", "type": "subscribe", "payload": {
                    "query": "subscription { newBlocks { number hash removed } }"}}))

                async def until(done, what: str) -> None:
                    deadline = time.monotonic() + 120
                    while not done():
                        assert time.monotonic() < deadline, (what, got)
                        msg = json.loads(await asyncio.wait_for(ws.recv(), 60))
                        assert msg["type"] == "next", msg
                        got[msg["id"]].append(msg["payload"]["data"])

                await asyncio.to_thread(submit, bob.ws, ALICE, "Balances",
                                        "transfer_keep_alive", {"dest": dest, "value": TOKEN})
                await until(lambda: got["t"], "the transfer on Bob's branch")
                await asyncio.to_thread(bob.call, "system_addReservedPeer", [alice.bootnode()])
                await until(lambda: any(m["transfers"]["removed"] for m in got["t"]),
                            "the transfer withdrawn")
                # The winning branch's blocks follow the withdrawal.
                await until(lambda: not got["b"][-1]["newBlocks"]["removed"]
                            and any(m["newBlocks"]["removed"] for m in got["b"]),
                            "Alice's blocks after the withdrawal")
            return got

        got = asyncio.run(run())
        first, withdrawn = got["t"][0]["transfers"], [
            m["transfers"] for m in got["t"] if m["transfers"]["removed"]]
        assert first["removed"] is False and first["to"] == dest
        assert withdrawn == [{**first, "removed": True}]

        blocks = [m["newBlocks"] for m in got["b"]]
        cut = next(i for i, b in enumerate(blocks) if b["removed"])
        end = next(i for i in range(cut, len(blocks)) if not blocks[i]["removed"])
        sent_before, removed, after = blocks[:cut], blocks[cut:end], blocks[end:]
        # Withdrawn: blocks sent before, newest first, none of them on Alice's chain.
        assert [b["number"] for b in removed] == sorted({b["number"] for b in removed},
                                                        reverse=True)
        by_number = {b["number"]: b["hash"] for b in sent_before}
        for b in removed:
            assert by_number[b["number"]] == b["hash"]
            assert alice.call("chain_getBlockHash", [b["number"]]) != b["hash"]
        assert removed[0]["number"] == max(by_number)  # everything above the fork point
        # Then Alice's chain from the fork point on, which is the lowest withdrawn block or, when
        # the subscription began after Bob's first blocks (a loaded machine), below it.
        assert after[0]["number"] <= removed[-1]["number"]
        numbers = [b["number"] for b in after]
        assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
        for b in after:
            assert alice.call("chain_getBlockHash", [b["number"]]) == b["hash"]
    finally:
        ix.stop()
        bob.stop()
        alice.stop()


def _on_port(node: DevNode, port: int) -> DevNode:
    i = node.args.index("--rpc-port")
    node.args[i + 1] = str(port)
    node.rpc_port = port
    return node


def _ready(ix: Indexer, base: str | None = None) -> tuple[int, str, dict[str, str]]:
    """/ready's status, message and each check's detail."""
    status, body = ix.http("GET", "/ready", base=base)
    checks = body.get("checks") or body.get("error", {}).get("checks") or []
    message = body.get("error", {}).get("message", "")
    return status, message, {c["name"]: c["detail"] for c in checks}


def test_a_reset_archives_the_old_network_and_indexes_the_new_one(tmp_path, database_url):
    # Another runtime parameter, another genesis state: what a pallet-suite bump does.
    specs = [raw_spec(plain_spec(tmp_path / f"{name}.json", chain_id="reset_net", slot_ms=300,
                                 epoch_length=epoch))
             for name, epoch in (("before_reset", 10), ("after_reset", 11))]
    old = DevNode(tmp_path / "old", str(specs[0]), name="old").start()
    new = _on_port(DevNode(tmp_path / "new", str(specs[1]), name="new"), old.rpc_port)
    ix = Indexer(tmp_path / "indexer", old.ws, database_url)
    processor_url = f"http://127.0.0.1:{ix.processor_port}"
    frozen = False

    def freeze(on: bool) -> None:
        # SIGSTOP holds the processor between two states the test must see; SIGCONT lets it
        # find out what happened meanwhile, as after any stall.
        nonlocal frozen
        os.killpg(ix.procs["processor"].pid, signal.SIGSTOP if on else signal.SIGCONT)
        frozen = on

    try:
        ix.start_api()  # before any processor: nothing indexed, not ready
        status, message, _ = _ready(ix)
        assert status == 503 and "no network indexed yet" in message, message
        ix.start_processor()
        receiver = fresh_account().ss58_address
        number, xt_hash = submit(old.ws, ALICE, "Balances", "transfer_keep_alive",
                                 {"dest": receiver, "value": 3 * TOKEN})
        old_genesis = old.call("chain_getBlockHash", [0])
        ix.wait_height(number)
        ix.wait_for(lambda: _ready(ix)[0] == 200, 30, "/ready on the first genesis")
        assert _ready(ix)[2]["chain"] == old_genesis

        old.stop()  # the reset: the nodes go down and come back on a new genesis
        ix.wait_for(lambda: "not connected" in _ready(ix, processor_url)[1], 30,
                    "the processor to report the lost node")
        status, _, checks = _ready(ix, processor_url)
        assert status == 503 and f"not connected to {old.ws}" in checks["processor"], checks
        ix.wait_for(lambda: _ready(ix)[0] == 503, 30, "the API to report the lost node")
        assert "the chain does not answer" in _ready(ix)[2]["chain"]

        freeze(True)  # the new chain comes up before the processor looks again
        new.start()
        new_genesis = new.call("chain_getBlockHash", [0])
        assert new_genesis != old_genesis
        ix.wait_for(lambda: new_genesis in _ready(ix)[1], 30, "/ready to see the new genesis")
        status, message, checks = _ready(ix)
        assert status == 503, message
        assert new_genesis in checks["chain"] and old_genesis in checks["chain"], checks
        assert old_genesis in checks["index"], checks
        freeze(False)

        def ready_on_new() -> bool:
            status, _, checks = _ready(ix)
            return status == 200 and checks["chain"] == new_genesis
        ix.wait_for(ready_on_new, 60, "/ready on the new genesis")
        st = ix.status()
        assert st["genesisHash"] == new_genesis and st["resetCount"] == 1, st
        assert st["height"] >= new.best() - 5  # ready means caught up within ready_max_lag
        ix.wait_for(lambda: _ready(ix, processor_url)[0] == 200, 30, "the processor's /ready")
        assert new_genesis in _ready(ix, processor_url)[2]["processor"]
        log = (tmp_path / "indexer" / "processor.log").read_text()
        assert f"genesis changed from {old_genesis} to {new_genesis}" in log, log[-3000:]

        new.wait_for(lambda: new.best() >= 3, 30, "blocks on the new chain")
        st = ix.wait_height(3, genesis=new_genesis, timeout=60)
        assert st["resetCount"] == 1
        q = """query($a: String!, $g: String) { transfers(account: $a, genesisHash: $g) {
                 edges { node { from to amount blockNumber extrinsicHash } } } }"""
        kept = ix.data(q, {"a": receiver, "g": old_genesis})["transfers"]["edges"]
        assert [e["node"] for e in kept] == [{
            "from": ALICE.ss58_address, "to": receiver, "amount": str(3 * TOKEN),
            "blockNumber": number, "extrinsicHash": xt_hash}]
        assert ix.data(q, {"a": receiver, "g": None})["transfers"]["edges"] == []
        nets = ix.data("{ networks { genesisHash active resetCount height } }")["networks"]
        assert [(n["genesisHash"], n["active"], n["resetCount"]) for n in nets] == [
            (old_genesis, False, 0), (new_genesis, True, 1)]
        assert nets[0]["height"] >= number
        archived = ix.status(old_genesis)
        assert archived["genesisHash"] == old_genesis and archived["height"] >= number
    finally:
        if frozen:
            freeze(False)
        ix.stop()
        new.stop()
        old.stop()

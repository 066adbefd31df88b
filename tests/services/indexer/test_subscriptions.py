"""Subscriptions over WebSocket (graphql-transport-ws) against the API program and a running
development chain, on SQLite and on PostgreSQL: a transfer to a fresh account made with
substrate-interface arrives on a filtered ``transfers`` subscription, ``newBlocks`` delivers
consecutive blocks, a subscription over the per-connection or per-address limit is refused
naming it, and a subscriber left more blocks behind than allowed is closed with the
slow-consumer code."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time

import pytest
import websockets
from substrateinterface import Keypair

from tests.services.indexer.chain_ops import TOKEN, fresh_account, submit
from tests.services.indexer.harness import Indexer

ALICE = Keypair.create_from_uri("//Alice", ss58_format=42)
TRANSFERS_S = """subscription($a: String!) { transfers(filter: {to: {equalTo: $a}}) {
  from to amount blockNumber extrinsicHash } }"""


async def _next(ws: websockets.ClientConnection, timeout: float = 60) -> dict:
    return json.loads(await asyncio.wait_for(ws.recv(), timeout))


def test_a_transfer_arrives_on_its_subscription_and_limits_hold(chain, database_url, tmp_path):
    ix = Indexer(tmp_path / "indexer", chain.ws, database_url,
                 max_subscriptions_per_connection=2, max_subscriptions_per_address=3)
    ix.start()
    try:
        ix.wait_height(2)
        dest = fresh_account().ss58_address

        async def run() -> None:
            url = ix.url.replace("http://", "ws://") + "/graphql"
            async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:
                await ws.send(json.dumps({"type": "connection_init"}))
                assert (await _next(ws))["type"] == "connection_ack"
                await ws.send(json.dumps({"id": "t", "type": "subscribe", "payload": {
                    "query": TRANSFERS_S, "variables": {"a": dest}}}))
                await ws.send(json.dumps({"id": "b", "type": "subscribe", "payload": {
                    "query": "subscription { newBlocks { number } }"}}))
                await ws.send(json.dumps({"id": "x", "type": "subscribe", "payload": {
                    "query": "subscription { newBlocks { number } }"}}))
                sent = asyncio.create_task(asyncio.to_thread(
                    submit, chain.ws, ALICE, "Balances", "transfer_keep_alive",
                    {"dest": dest, "value": 3 * TOKEN}))
                got: dict[str, list] = {"t": [], "b": [], "x": []}
                deadline = time.monotonic() + 90
                while not got["t"] or len(got["b"]) < 3 or len(got["x"]) < 2:
                    assert time.monotonic() < deadline, got
                    msg = await _next(ws)
                    got[msg["id"]].append(msg)
                number, xt_hash = await sent
                # Refused as it starts: an error naming the limit, then complete.
                refused, done = got["x"]
                assert done == {"id": "x", "type": "complete"}, got["x"]
                assert refused["payload"]["data"] is None
                assert "2 open on this connection, at most 2" in \
                    refused["payload"]["errors"][0]["message"]
                (transfer,) = [m for m in got["t"] if m["type"] == "next"]
                assert transfer["payload"]["data"]["transfers"] == {
                    "from": ALICE.ss58_address, "to": dest, "amount": str(3 * TOKEN),
                    "blockNumber": number, "extrinsicHash": xt_hash}
                blocks = [m["payload"]["data"]["newBlocks"]["number"] for m in got["b"]]
                assert blocks == list(range(blocks[0], blocks[0] + len(blocks))), blocks

                # Another connection from the same address: one more is allowed (3 in all).
                async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as two:
                    await two.send(json.dumps({"type": "connection_init"}))
                    assert (await _next(two))["type"] == "connection_ack"
                    for op in ("y1", "y2"):
                        await two.send(json.dumps({"id": op, "type": "subscribe", "payload": {
                            "query": "subscription { newBlocks { number } }"}}))
                    seen: dict[str, list] = {"y1": [], "y2": []}
                    while not seen["y1"] or len(seen["y2"]) < 2:
                        assert time.monotonic() < deadline + 60, seen
                        msg = await _next(two)
                        seen[msg["id"]].append(msg)
                    assert seen["y1"][0]["type"] == "next" and seen["y1"][0]["payload"].get(
                        "data"), seen["y1"]
                    assert "3 open from 127.0.0.1, at most 3" in \
                        seen["y2"][0]["payload"]["errors"][0]["message"], seen["y2"]

        asyncio.run(run())
    finally:
        ix.stop()


def test_a_subscriber_left_behind_is_closed_with_the_slow_consumer_code(chain, tmp_path):
    """The processor is held back while blocks arrive, then writes them in one commit: the
    subscriber is more blocks behind than it may be, as one that reads slower than blocks
    arrive, and its connection is closed with 4419."""
    ix = Indexer(tmp_path / "indexer", chain.ws, f"sqlite:///{tmp_path / 'ix.db'}",
                 subscription_max_backlog=3)
    ix.start()
    try:
        height = ix.wait_height(2)["height"]
        ix.stop("processor")

        async def run() -> None:
            url = ix.url.replace("http://", "ws://") + "/graphql"
            async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:
                await ws.send(json.dumps({"type": "connection_init"}))
                assert (await _next(ws))["type"] == "connection_ack"
                await ws.send(json.dumps({"id": "b", "type": "subscribe", "payload": {
                    "query": "subscription { newBlocks { number } }"}}))
                await asyncio.to_thread(chain.wait_for, lambda: chain.best() > height + 8,
                                        60, "blocks while the processor is stopped")
                ix.start_processor()
                with pytest.raises(websockets.ConnectionClosed) as closed:
                    while True:
                        await _next(ws)
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 4419

        asyncio.run(run())
    finally:
        ix.stop()


def test_events_unfiltered_transfers_and_index_status_subscriptions(chain, database_url,
                                                                    tmp_path):
    """``events(filter)`` by an account, ``transfers`` with no filter (every new transfer) and
    ``indexStatus`` (at once, then after commits) on one connection."""
    ix = Indexer(tmp_path / "indexer", chain.ws, database_url)
    ix.start()
    try:
        ix.wait_height(2)
        dest = fresh_account().ss58_address

        async def run() -> None:
            url = ix.url.replace("http://", "ws://") + "/graphql"
            async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:
                await ws.send(json.dumps({"type": "connection_init"}))
                assert (await _next(ws))["type"] == "connection_ack"
                for op, query in (
                        ("e", "subscription($a: String!) { events(filter: {account: {equalTo: "
                              "$a}}) { blockNumber pallet name args } }"),
                        ("t", "subscription { transfers { to amount blockNumber } }"),
                        ("s", "subscription { indexStatus { height genesisHash } }")):
                    await ws.send(json.dumps({"id": op, "type": "subscribe", "payload": {
                        "query": query, "variables": {"a": dest}}}))
                sent = asyncio.create_task(asyncio.to_thread(
                    submit, chain.ws, ALICE, "Balances", "transfer_keep_alive",
                    {"dest": dest, "value": 2 * TOKEN}))
                got: dict[str, list] = {"e": [], "t": [], "s": []}
                deadline = time.monotonic() + 90

                def mine() -> list[dict]:
                    return [m["payload"]["data"]["transfers"] for m in got["t"]
                            if m["payload"]["data"]["transfers"]["to"] == dest]
                while not sent.done() or not mine() or not any(
                        m["payload"]["data"]["events"]["name"] == "Transfer" for m in got["e"]):
                    assert time.monotonic() < deadline, got
                    with contextlib.suppress(TimeoutError):
                        msg = await _next(ws, timeout=1)
                        assert msg["type"] == "next" and not msg["payload"].get("errors"), msg
                        got[msg["id"]].append(msg)
                number, _xt = await sent
                assert mine() == [{"to": dest, "amount": str(2 * TOKEN), "blockNumber": number}]
                events = [m["payload"]["data"]["events"] for m in got["e"]]
                assert {e["blockNumber"] for e in events} == {number}, events
                assert all(dest in json.dumps(e["args"]) for e in events), events
                (transfer,) = [e for e in events if e["name"] == "Transfer"]
                assert transfer["pallet"] == "Balances" and transfer["args"]["to"] == dest
                # Unfiltered: transfers to others come too, if any; none is sent twice.
                keys = [(m["payload"]["data"]["transfers"]["blockNumber"],
                         m["payload"]["data"]["transfers"]["to"]) for m in got["t"]]
                assert len(keys) == len(set(keys))
                # A message per change of the status (its finalized and chain heights too), so
                # a height may repeat; it never goes back.
                heights = [m["payload"]["data"]["indexStatus"]["height"] for m in got["s"]]
                assert len(set(heights)) >= 2 and heights == sorted(heights), heights
                assert heights[-1] >= number

        asyncio.run(run())
    finally:
        ix.stop()

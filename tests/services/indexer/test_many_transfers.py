"""Filters and counts against the chain itself, on SQLite and on PostgreSQL: a few hundred
transfers made with substrate-interface, the chain's own Balances.Transfer events read back with
substrate-interface block by block, and the indexer's filtered pages and totalCount by account
and by block range must be exactly those."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from substrateinterface import Keypair, SubstrateInterface

from tests.services.indexer.chain_ops import TOKEN, fresh_account
from tests.services.indexer.harness import Indexer
from tests.support.devnode import DevNode

ALICE = Keypair.create_from_uri("//Alice", ss58_format=42)
COUNT = 300
PAGE_Q = """query($f: TransferFilter, $after: String, $o: OrderBy) { transfers(filter: $f,
  first: 100, after: $after, orderBy: $o) { totalCount totalCountCapped edges { node { from to
  amount blockNumber eventIndex } } pageInfo { hasNextPage endCursor } } }"""


@pytest.fixture(scope="module")
def transfers(chain: DevNode) -> Iterator[tuple[list[str], list[tuple], int]]:
    """(accounts, the chain's transfers as (block, event index, from, to, amount), last block)."""
    dests = [fresh_account().ss58_address for _ in range(5)]
    substrate = SubstrateInterface(url=chain.ws, ss58_format=42)
    try:
        start = chain.best()
        nonce = int(chain.call("system_accountNextIndex", [ALICE.ss58_address]))
        for i in range(COUNT):
            call = substrate.compose_call("Balances", "transfer_keep_alive", {
                "dest": dests[i % len(dests)], "value": TOKEN + i})
            xt = substrate.create_signed_extrinsic(call=call, keypair=ALICE, nonce=nonce + i)
            chain.call("author_submitExtrinsic", [str(xt.data)])
        # The nonce in the chain's state (system_accountNextIndex counts the pool too).
        chain.wait_for(lambda: substrate.query("System", "Account", [ALICE.ss58_address])
                       .value["nonce"] >= nonce + COUNT, 180, "every transfer included")
        end = chain.best()
        seen = []
        for number in range(start, end + 1):
            block_hash = substrate.get_block_hash(number)
            for index, record in enumerate(substrate.get_events(block_hash)):
                event = record.value["event"]
                if (event["module_id"], event["event_id"]) == ("Balances", "Transfer"):
                    args = event["attributes"]
                    if args["to"] in dests:
                        seen.append((number, index, args["from"], args["to"],
                                     int(args["amount"])))
        assert len(seen) == COUNT, len(seen)
        yield dests, seen, end
    finally:
        substrate.close()


def _all(ix: Indexer, f: dict, order: str | None = None) -> tuple[list[tuple], int]:
    rows, after, total = [], None, None
    while True:
        page = ix.data(PAGE_Q, {"f": f, "after": after, "o": order})["transfers"]
        assert page["totalCountCapped"] is False
        total = page["totalCount"] if total is None else total
        assert page["totalCount"] == total  # the same on every page
        rows += [(n["node"]["blockNumber"], n["node"]["eventIndex"], n["node"]["from"],
                  n["node"]["to"], int(n["node"]["amount"])) for n in page["edges"]]
        if not page["pageInfo"]["hasNextPage"]:
            return rows, total
        after = page["pageInfo"]["endCursor"]


def test_filters_and_counts_agree_with_the_chain(transfers, chain, database_url, tmp_path):
    dests, seen, end = transfers
    ix = Indexer(tmp_path / "indexer", chain.ws, database_url)
    ix.start()
    try:
        ix.wait_height(end, timeout=120)
        assert _all(ix, {"to": {"in": dests}}) == (seen, COUNT)
        # Many transfers share a block: the tie-break (the event's index) holds both ways.
        assert len({t[0] for t in seen}) < COUNT
        assert _all(ix, {"to": {"in": dests}}, "BLOCK_NUMBER_DESC") == (seen[::-1], COUNT)
        for account in dests:
            mine = [t for t in seen if account in (t[2], t[3])]
            assert _all(ix, {"account": {"equalTo": account}}) == (mine, len(mine))
        low, high = seen[len(seen) // 3][0], seen[2 * len(seen) // 3][0]
        ranged = [t for t in seen if low <= t[0] <= high and t[3] == dests[0]]
        assert _all(ix, {"to": {"equalTo": dests[0]}, "blockNumber": {
            "greaterThanOrEqualTo": low, "lessThanOrEqualTo": high}}) == (ranged, len(ranged))
    finally:
        ix.stop()

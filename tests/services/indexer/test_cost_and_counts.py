"""Query cost and counts against an index of a running development chain, on SQLite and on
PostgreSQL: the nested events → extrinsic → events attack and a hostile in-list of 100 accounts
(200 index branches) are refused before any SQL runs; an
allowed nested query runs one SQL query per level whatever its page sizes (counted on the API's
engine); ``totalCount`` agrees with the transfers made, is exact for blocks and is capped, and
says so, past ``count_cap``; ``_metadata`` carries SubQuery's names with the chain's values."""

from __future__ import annotations

import time

from substrateinterface import Keypair, SubstrateInterface

from ops_tools import __version__
from tests.services.indexer.chain_ops import TOKEN, fresh_account, submit
from tests.services.indexer.harness import Api, Indexer

ALICE = Keypair.create_from_uri("//Alice", ss58_format=42)

# The security review's query: 19,999 under the old cost (each field 1, lists multiplied), so it
# ran, with one SQL query per event and per extrinsic.
ATTACK = ("{ events(first: 99) { edges { node { extrinsic { events(first: 99) { index name } } "
          "} } } }")
HOSTILE = ("query($f: TransferFilter) {{ transfers(first: {n}, filter: $f) {{ edges {{ node {{ "
           "from to blockNumber }} }} }} }}")
NESTED = ("{{ events(first: {n}) {{ edges {{ node {{ blockNumber index extrinsicIndex "
          "extrinsic {{ blockNumber index hash events(first: {m}) {{ blockNumber index "
          "extrinsicIndex }} }} }} }} }} }}")


def test_nested_cost_sql_per_level_and_total_counts(chain, database_url, tmp_path):
    ix = Indexer(tmp_path / "indexer", chain.ws, database_url)
    ix.start()
    api = Api(tmp_path, chain.ws, database_url, count_cap=3)
    try:
        receiver = fresh_account().ss58_address
        sent = [submit(chain.ws, ALICE, "Balances", "transfer_keep_alive",
                       {"dest": receiver, "value": TOKEN})[0] for _ in range(4)]
        ix.wait_height(sent[-1])

        # The attack is refused before anything reads the database, naming cost and limit.
        with api.counting() as sql:
            status, body = api.post(ATTACK)
        messages = [e["message"] for e in body.get("errors") or []]
        assert any("query cost 21790 is over the limit 20000" in m for m in messages), body
        assert status == 400 and body.get("data") is None and sql == [], (status, sql)

        # The hostile in-list, against the running net-indexer: 100 accounts, either side, are
        # 200 index branches of up to first + 1 rows each; paid per branch, it is refused with
        # 400 naming the cost, the limit and the branches, and reads nothing (counted in
        # process). The same list with a small page costs within the limit and is right.
        hostile = [receiver] + [fresh_account().ss58_address for _ in range(99)]
        status, body = ix.graphql(HOSTILE.format(n=100), {"f": {"account": {"in": hostile}}})
        messages = [e["message"] for e in body.get("errors") or []]
        assert status == 400 and body.get("data") is None, (status, body)
        assert any("query cost 102000 is over the limit 20000: the filter of transfers expands "
                   "to 200 index branches" in m for m in messages), body
        with api.counting() as sql:
            status, body = api.post(HOSTILE.format(n=100), {"f": {"account": {"in": hostile}}})
        assert status == 400 and sql == [], (status, sql)
        status, body = ix.graphql(HOSTILE.format(n=2), {"f": {"account": {"in": hostile}}})
        assert status == 200 and not body.get("errors"), body
        edges = body["data"]["transfers"]["edges"]
        assert [e["node"]["blockNumber"] for e in edges] == sent[:2]
        assert all(e["node"]["to"] == receiver for e in edges)

        # Allowed nested pages: one query for the network, one per level, whatever the sizes.
        counts = {}
        for n, m in ((3, 1), (15, 10)):
            with api.counting() as sql:
                events = api.data(NESTED.format(n=n, m=m))["events"]["edges"]
            counts[(n, m)] = len(sql)
            assert len(events) == n
            for edge in events:
                node, xt = edge["node"], edge["node"]["extrinsic"]
                if node["extrinsicIndex"] is None:
                    assert xt is None
                    continue
                assert (xt["blockNumber"], xt["index"]) == (node["blockNumber"],
                                                            node["extrinsicIndex"])
                own = [(e["blockNumber"], e["extrinsicIndex"]) for e in xt["events"]]
                assert own and len(own) <= m
                assert set(own) == {(node["blockNumber"], node["extrinsicIndex"])}
                indices = [e["index"] for e in xt["events"]]
                assert indices == sorted(indices)
        assert counts[(3, 1)] == counts[(15, 10)] <= 4, counts

        # totalCount: agrees with the transfers made; capped at count_cap (3) and says so.
        q = ("query($a: String!, $lo: Int, $hi: Int) { transfers(account: $a, fromBlock: $lo, "
             "toBlock: $hi, first: 1) { totalCount totalCountCapped edges { cursor } } }")
        capped = api.data(q, {"a": receiver})["transfers"]
        assert (capped["totalCount"], capped["totalCountCapped"]) == (3, True)
        exact = api.data(q, {"a": receiver, "lo": sent[1], "hi": sent[2]})["transfers"]
        expected = sum(sent[1] <= b <= sent[2] for b in sent)
        assert (exact["totalCount"], exact["totalCountCapped"]) == (expected, False)
        none = api.data(q, {"a": fresh_account().ss58_address})["transfers"]
        assert (none["totalCount"], none["totalCountCapped"]) == (0, False)

        # Blocks: exact from the index's height, without counting rows; the count runs only
        # when asked for.
        with api.counting() as sql:
            blocks = api.data("query($top: Int!) { blocks(first: 1, toBlock: $top) { "
                              "totalCount totalCountCapped } ranged: blocks(fromBlock: 2, "
                              "toBlock: 5) { totalCount } }", {"top": sent[-1]})
        assert not any("count(" in s.lower() for s in sql), sql
        assert blocks["blocks"] == {"totalCount": sent[-1] + 1, "totalCountCapped": False}
        assert blocks["ranged"]["totalCount"] == 4
        with api.counting() as sql:
            api.data("{ events(first: 1) { edges { cursor } } }")
        without = len(sql)
        with api.counting() as sql:
            api.data("{ events(first: 1) { totalCount totalCountCapped edges { cursor } } }")
        assert len(sql) == without + 1, sql
    finally:
        api.close()
        ix.stop()


METADATA_Q = """{ _metadata { lastProcessedHeight lastProcessedTimestamp targetHeight chain
  specName genesisHash indexerHealthy indexerNodeVersion queryNodeVersion
  rowCountEstimate { table estimate } }
  indexStatus { height chainHeight genesisHash chainName } }"""


def test_metadata_has_subquerys_names_beside_index_status(chain, database_url, tmp_path):
    ix = Indexer(tmp_path / "indexer", chain.ws, database_url)
    ix.start()
    api = Api(tmp_path, chain.ws, database_url)
    try:
        ix.wait_height(3)
        ix.stop("processor")  # the figures hold still while they are compared
        substrate = SubstrateInterface(url=chain.ws, ss58_format=42)
        try:
            genesis = substrate.get_block_hash(0).lower()
            runtime = substrate.rpc_request("state_getRuntimeVersion", [])["result"]
            chain_name = substrate.rpc_request("system_chain", [])["result"]
        finally:
            substrate.close()

        def settled() -> dict | None:
            data = api.data(METADATA_Q)
            blocks = {r["table"]: r["estimate"] for r in data["_metadata"]["rowCountEstimate"]}
            # PostgreSQL's statistics arrive within a second or so of the commit.
            return data if blocks["indexer_blocks"] == data["indexStatus"]["height"] + 1 else None
        data = ix.wait_for(settled, 30, "the row estimates to count every block")
        meta, status = data["_metadata"], data["indexStatus"]
        assert meta["lastProcessedHeight"] == status["height"] >= 3
        assert meta["targetHeight"] == status["chainHeight"] >= status["height"]
        assert meta["genesisHash"] == status["genesisHash"] == genesis
        assert meta["chain"] == status["chainName"] == chain_name
        assert meta["specName"] == runtime["specName"]
        assert meta["indexerHealthy"] is True
        assert meta["indexerNodeVersion"] == meta["queryNodeVersion"] == __version__
        assert 0 <= time.time() * 1000 - int(meta["lastProcessedTimestamp"]) < 60_000
        tables = {r["table"] for r in meta["rowCountEstimate"]}
        assert {"indexer_blocks", "indexer_events", "indexer_transfers"} <= tables
    finally:
        api.close()
        ix.stop()


def test_introspection_and_the_ide_are_settings(tmp_path):
    """On by default (the local network); off, an introspection query is refused and GET
    /graphql serves no IDE. No chain needed: neither reads the index."""
    url = f"sqlite:///{tmp_path / 'ix.db'}"
    on = Api(tmp_path / "on", "ws://127.0.0.1:9", url)
    off = Api(tmp_path / "off", "ws://127.0.0.1:9", url, introspection=False, graphql_ide=False)
    try:
        query = "{ __schema { queryType { name } } }"
        assert on.data(query) == {"__schema": {"queryType": {"name": "Query"}}}
        status, body = off.post(query)
        assert status == 400 and "introspection" in body["errors"][0]["message"].lower(), body
        page = on.client.get("/graphql", headers={"Accept": "text/html"})
        assert page.status_code == 200 and "graphiql" in page.text.lower()
        page = off.client.get("/graphql", headers={"Accept": "text/html"})
        assert "graphiql" not in page.text.lower(), page.text[:200]
    finally:
        on.close()
        off.close()

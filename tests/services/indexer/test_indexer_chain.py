"""The indexer against a running development chain, on SQLite and on PostgreSQL: transfers,
a registration and heartbeats made with substrate-interface come back through GraphQL with the
right values; pagination is stable while blocks arrive; bad queries get GraphQL errors."""

from __future__ import annotations

import urllib.request

from substrateinterface import Keypair

from tests.services.indexer.chain_ops import TOKEN, current_epoch, fresh_account, submit
from tests.services.indexer.harness import Indexer

ALICE = Keypair.create_from_uri("//Alice", ss58_format=42)
ATTESTATION = "0x" + "ab" * 32

TRANSFERS_Q = """query($a: String!) { transfers(account: $a) { edges { node {
  from to amount blockNumber extrinsicHash } cursor } pageInfo { hasNextPage endCursor } } }"""
OPERATOR_Q = """query($a: String!) {
  operators(account: $a) { edges { node { account stake attestationHash lastHeartbeatEpoch
    registeredAt } } }
  heartbeats(account: $a) { edges { node { account epoch blockNumber extrinsicHash } } }
  accounts(address: $a) { edges { node { address free reserved nonce } } }
  events(account: $a, pallet: "OperatorStake", name: "OperatorRegistered") {
    edges { node { blockNumber phase args extrinsic { hash signer pallet call success fee } } } }
}"""


def test_transfers_registration_and_heartbeats_are_indexed(chain, database_url, tmp_path):
    ix = Indexer(tmp_path / "indexer", chain.ws, database_url)
    ix.start()
    try:
        receiver, operator = fresh_account(), fresh_account()
        sent = []
        for amount in (5 * TOKEN, 7 * TOKEN):
            number, xt_hash = submit(chain.ws, ALICE, "Balances", "transfer_keep_alive",
                                     {"dest": receiver.ss58_address, "value": amount})
            sent.append((number, xt_hash, amount))
        submit(chain.ws, ALICE, "Balances", "transfer_keep_alive",
               {"dest": operator.ss58_address, "value": 10 * TOKEN})
        reg_block, reg_hash = submit(chain.ws, operator, "OperatorStake", "register",
                                     {"stake": 2 * TOKEN, "attestation_hash": ATTESTATION})
        epoch = current_epoch(chain.ws)
        beats = [submit(chain.ws, operator, "OperatorStake", "heartbeat", {"epoch": e})
                 for e in (epoch, epoch + 1)]
        ix.wait_height(beats[-1][0])

        data = ix.data(TRANSFERS_Q, {"a": receiver.ss58_address})
        got = [(e["node"]["blockNumber"], e["node"]["extrinsicHash"], int(e["node"]["amount"]),
                e["node"]["from"], e["node"]["to"]) for e in data["transfers"]["edges"]]
        assert got == [(n, h, a, ALICE.ss58_address, receiver.ss58_address) for n, h, a in sent]

        data = ix.data(OPERATOR_Q, {"a": operator.ss58_address})
        (op,) = [e["node"] for e in data["operators"]["edges"]]
        assert op == {"account": operator.ss58_address, "stake": str(2 * TOKEN),
                      "attestationHash": ATTESTATION, "lastHeartbeatEpoch": epoch + 1,
                      "registeredAt": reg_block}
        hb = [(e["node"]["epoch"], e["node"]["blockNumber"], e["node"]["extrinsicHash"])
              for e in data["heartbeats"]["edges"]]
        assert hb == [(epoch, beats[0][0], beats[0][1]), (epoch + 1, beats[1][0], beats[1][1])]
        (acct,) = [e["node"] for e in data["accounts"]["edges"]]
        assert acct["reserved"] == str(2 * TOKEN) and acct["nonce"] == 3
        # The same by SubQuery's filter: the operator (its record, its heartbeats by epoch).
        by_filter = ix.data("""query($a: String!, $e: Int!) {
          operators(filter: {account: {in: [$a]}}) { totalCount edges { node { account } } }
          heartbeats(filter: {account: {equalTo: $a}, epoch: {greaterThan: $e}}) {
            totalCount edges { node { epoch } } } }""", {"a": operator.ss58_address, "e": epoch})
        assert by_filter["operators"] == {"totalCount": 1, "edges": [
            {"node": {"account": operator.ss58_address}}]}
        assert by_filter["heartbeats"] == {"totalCount": 1, "edges": [
            {"node": {"epoch": epoch + 1}}]}
        (reg,) = [e["node"] for e in data["events"]["edges"]]
        assert reg["blockNumber"] == reg_block and reg["phase"] == "ApplyExtrinsic"
        assert reg["args"]["who"] == operator.ss58_address
        assert reg["args"]["attestation_hash"] == ATTESTATION
        assert reg["extrinsic"]["hash"] == reg_hash and reg["extrinsic"]["success"] is True
        assert reg["extrinsic"]["signer"] == operator.ss58_address
        assert (reg["extrinsic"]["pallet"], reg["extrinsic"]["call"]) == ("OperatorStake",
                                                                         "register")
        assert int(reg["extrinsic"]["fee"]) > 0

        # The receiver never signed: its balance is exactly what it was sent.
        data = ix.data("query($a: String!) { accounts(address: $a) { edges { node { free } } } }",
                       {"a": receiver.ss58_address})
        assert data["accounts"]["edges"][0]["node"]["free"] == str(12 * TOKEN)

        status, body = ix.http("GET", "/ready")
        assert status == 200, body
        status, body = ix.processor_ready()
        assert status == 200, body
        (check,) = [c for c in body["checks"] if c["name"] == "processor"]
        assert f"of {chain.call('chain_getBlockHash', [0])}" in check["detail"]
        st = ix.status()
        assert st["genesisHash"] == chain.call("chain_getBlockHash", [0])
        assert st["resetCount"] == 0 and st["specVersion"] == 6
        assert st["finalizedHeight"] <= chain.finalized()
        assert st["height"] >= beats[-1][0]

        # A second API instance on the same database (one processor writes, several serve).
        second = Indexer(tmp_path / "second", chain.ws, database_url)
        second.start_api()
        try:
            data = second.data(TRANSFERS_Q, {"a": receiver.ss58_address})
            assert len(data["transfers"]["edges"]) == 2
            assert second.status()["genesisHash"] == st["genesisHash"]
        finally:
            second.stop()
    finally:
        ix.stop()


def deep_query(levels: int) -> str:
    inner = "index"
    for _ in range(levels):
        inner = f"extrinsic {{ events(first: 1) {{ {inner} }} }}"
    return f"{{ events(first: 1) {{ edges {{ node {{ {inner} }} }} }} }}"


EVENTS_PAGE_Q = """query($after: String) { events(first: 7, after: $after) {
  edges { node { blockNumber index } cursor } pageInfo { hasNextPage endCursor } } }"""


def test_pagination_is_stable_while_blocks_arrive_and_bad_queries_get_errors(
        chain, database_url, tmp_path):
    ix = Indexer(tmp_path / "indexer", chain.ws, database_url)
    ix.start()
    try:
        dest = fresh_account().ss58_address
        for _ in range(3):  # each transfer emits four events
            number, _hash = submit(chain.ws, ALICE, "Balances", "transfer_keep_alive",
                                   {"dest": dest, "value": TOKEN})
        ix.wait_height(number)
        first_page = ix.data(EVENTS_PAGE_Q, {"after": None})["events"]
        keys, after = [], None
        while True:
            page = ix.data(EVENTS_PAGE_Q, {"after": after})["events"]
            keys += [(e["node"]["blockNumber"], e["node"]["index"]) for e in page["edges"]]
            after = page["pageInfo"]["endCursor"]
            if not page["pageInfo"]["hasNextPage"]:
                break
            # New blocks with new events arrive between the pages.
            number, _hash = submit(chain.ws, ALICE, "Balances", "transfer_keep_alive",
                                   {"dest": dest, "value": TOKEN})
            ix.wait_height(number)
        assert keys == sorted(set(keys)), "pages overlap or are out of order"
        assert len(keys) > 12
        # The second page, asked for again after more blocks arrived, starts at the same row.
        again = ix.data(EVENTS_PAGE_Q, {"after": first_page["pageInfo"]["endCursor"]})["events"]
        assert (again["edges"][0]["node"]["blockNumber"], again["edges"][0]["node"]["index"]) \
            == keys[7]

        bad = {
            "{ indexStatus { height ": "Syntax Error",
            "{ indexStatus { heigth } }": "Cannot query field 'heigth'",
            "{ events(first: 1000) { edges { cursor } } }": "first: 1000",
            '{ events(after: "nope") { edges { cursor } } }': "after:",
            "{ events(first: 100) { edges { node { extrinsic { events(first: 100) { extrinsic "
            "{ events(first: 100) { index } } } } } } } }": "query cost",
            deep_query(6): "exceeds maximum operation depth",
            '{ indexStatus(genesisHash: "0x00") { height } }': "genesisHash: 0x00",
        }
        # GraphiQL for people, on GET.
        req = urllib.request.Request(ix.url + "/graphql", headers={"Accept": "text/html"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 200 and "graphiql" in resp.read().decode().lower()

        for query, message in bad.items():
            status, body = ix.graphql(query)
            assert status != 500 and isinstance(body, dict), (query, status, body)
            errors = body.get("errors") or []
            assert any(message in e["message"] for e in errors), (query, body)
    finally:
        ix.stop()

"""SubQuery-style filters and orderBy against an index of a running development chain, on
SQLite and on PostgreSQL: transfers made with substrate-interface come back by recipient, either
side, block range, and/or (accounts at any depth), in both orders, with totalCount agreeing; a
filter no index serves, or past the bound on index branches, is refused, naming the field,
before any SQL runs. The refusal rules themselves, pure, too."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from substrateinterface import Keypair, SubstrateInterface

from ops_tools.services.indexer import filters
from ops_tools.services.indexer.queries import QueryError
from ops_tools.services.indexer.schema import (
    BooleanFilter,
    DatetimeFilter,
    EventFilter,
    ExtrinsicFilter,
    HeartbeatFilter,
    IntFilter,
    StringFilter,
)
from tests.services.indexer.chain_ops import TOKEN, fresh_account, submit
from tests.services.indexer.harness import Api, Indexer

ALICE = Keypair.create_from_uri("//Alice", ss58_format=42)

TRANSFERS_Q = """query($f: TransferFilter, $o: OrderBy) { transfers(filter: $f, orderBy: $o) {
  totalCount totalCountCapped edges { node { from to amount blockNumber extrinsicHash } } } }"""
EXTRINSICS_Q = """query($f: ExtrinsicFilter) { extrinsics(filter: $f) { totalCount
  edges { node { blockNumber hash signer pallet call success } } } }"""
EVENTS_Q = """query($f: EventFilter) { events(filter: $f) { totalCount
  edges { node { blockNumber pallet name args } } } }"""


BLOCKS_Q = """query($f: BlockFilter) { blocks(filter: $f, first: 100) { totalCount
  edges { node { number hash timestamp } } } }"""


def _is(value: str) -> dict:
    return {"equalTo": value}


def _iso(millis: int) -> str:
    return datetime.fromtimestamp(millis / 1000, tz=UTC).isoformat()


def block_times(ws_url: str, numbers: list[int]) -> dict[int, int]:
    """Timestamp.Now at each block, as substrate-interface reads it from the chain."""
    substrate = SubstrateInterface(url=ws_url, ss58_format=42)
    try:
        return {n: int(substrate.query("Timestamp", "Now",
                                       block_hash=substrate.get_block_hash(n)).value)
                for n in numbers}
    finally:
        substrate.close()


def test_filters_agree_with_the_chain_and_unindexed_filters_are_refused(
        chain, database_url, tmp_path):
    ix = Indexer(tmp_path / "indexer", chain.ws, database_url)
    ix.start()
    api = Api(tmp_path, chain.ws, database_url)
    try:
        a, b = fresh_account().ss58_address, fresh_account().ss58_address
        sent = [(*submit(chain.ws, ALICE, "Balances", "transfer_keep_alive",
                         {"dest": dest, "value": amount * TOKEN}), dest, amount)
                for dest, amount in ((a, 1), (b, 2), (a, 3))]
        ix.wait_height(sent[-1][0])

        def transfers(f: dict, order: str | None = None) -> tuple[list[tuple], int]:
            got = api.data(TRANSFERS_Q, {"f": f, "o": order})["transfers"]
            assert got["totalCountCapped"] is False
            rows = [(e["node"]["blockNumber"], e["node"]["extrinsicHash"], e["node"]["to"],
                     int(e["node"]["amount"]) // TOKEN) for e in got["edges"]]
            assert all(e["node"]["from"] == ALICE.ss58_address for e in got["edges"])
            return rows, got["totalCount"]

        expected = [tuple(s) for s in sent]
        assert transfers({"to": _is(a)}) == ([expected[0], expected[2]], 2)
        assert transfers({"account": {"in": [a, b]}}) == (expected, 3)
        assert transfers({"or": [{"to": _is(a)}, {"to": _is(b)}]}, "BLOCK_NUMBER_DESC") \
            == (expected[::-1], 3)
        assert transfers({"account": _is(a), "blockNumber": {"lessThan": sent[2][0]}}) \
            == ([expected[0]], 1)
        assert transfers({"and": [{"to": _is(b)}, {"blockNumber": {
            "greaterThanOrEqualTo": sent[0][0], "lessThanOrEqualTo": sent[1][0]}}]}) \
            == ([expected[1]], 1)
        assert transfers({"to": _is(fresh_account().ss58_address)}) == ([], 0)
        # Accounts nested in and/or, each read as its own index range.
        assert transfers({"or": [{"and": [{"account": _is(a)}, {"blockNumber": {
            "lessThan": sent[2][0]}}]}, {"or": [{"to": {"in": [b]}}]}]}) == (expected[:2], 2)
        assert transfers({"and": [{"account": _is(ALICE.ss58_address)},
                                  {"or": [{"account": _is(b)}, {"to": _is(a)}]}]},
                         "BLOCK_NUMBER_DESC") == (expected[::-1], 3)

        got = api.data(EXTRINSICS_Q, {"f": {
            "signer": _is(ALICE.ss58_address), "pallet": _is("Balances"),
            "call": _is("transfer_keep_alive"), "success": {"equalTo": True},
            "blockNumber": {"greaterThanOrEqualTo": sent[0][0]}}})["extrinsics"]
        assert [(n["node"]["blockNumber"], n["node"]["hash"]) for n in got["edges"]] \
            == [(n, h) for n, h, _to, _amount in sent]
        assert got["totalCount"] == 3
        got = api.data(EVENTS_Q, {"f": {"account": _is(b), "pallet": _is("Balances"),
                                        "name": _is("Transfer")}})["events"]
        assert [(e["node"]["blockNumber"], e["node"]["args"]["to"]) for e in got["edges"]] \
            == [(sent[1][0], b)] and got["totalCount"] == 1

        # Block time ranges, against the chain's Timestamp.Now at the transfers' blocks.
        times = block_times(chain.ws, [n for n, *_ in sent])
        assert times[sent[0][0]] < times[sent[1][0]] < times[sent[2][0]]
        got = api.data(BLOCKS_Q, {"f": {"timestamp": _is(_iso(times[sent[1][0]]))}})["blocks"]
        assert [(e["node"]["number"], e["node"]["timestamp"]) for e in got["edges"]] \
            == [(sent[1][0], _iso(times[sent[1][0]]))] and got["totalCount"] == 1
        assert transfers({"account": {"in": [a, b]},
                          "timestamp": {"greaterThan": _iso(times[sent[0][0]])}}) \
            == (expected[1:], 2)
        assert transfers({"account": {"in": [a, b]}, "timestamp": {
            "greaterThanOrEqualTo": _iso(times[sent[0][0]]),
            "lessThanOrEqualTo": _iso(times[sent[1][0]])}}) == (expected[:2], 2)
        assert transfers({"to": _is(a), "timestamp": {"lessThan": _iso(times[sent[0][0]])}}) \
            == ([], 0)
        got = api.data(EVENTS_Q, {"f": {"pallet": _is("Balances"), "name": _is("Transfer"),
                                        "timestamp": {"in": [_iso(times[sent[2][0]])]}}}
                       )["events"]
        assert [e["node"]["args"]["to"] for e in got["edges"]] == [a]

        # The other lists: blocks by hash and number range, accounts and operators by their
        # key, heartbeats by account.
        h1 = chain.call("chain_getBlockHash", [sent[1][0]])
        got = api.data(BLOCKS_Q, {"f": {"or": [{"hash": _is(h1)}, {"number": {
            "greaterThan": sent[2][0] - 1, "lessThan": sent[2][0] + 1}}]}})["blocks"]
        assert [e["node"]["number"] for e in got["edges"]] == [sent[1][0], sent[2][0]]
        assert got["totalCount"] == 2
        got = api.data("""query($f: AccountFilter) { accounts(filter: $f) { totalCount
            edges { node { address free } } } }""", {"f": {"address": {"in": [a, b]}}})
        assert sorted((e["node"]["address"], int(e["node"]["free"]) // TOKEN)
                      for e in got["accounts"]["edges"]) == sorted([(a, 4), (b, 2)])
        got = api.data("""query($f: OperatorFilter) { operators(filter: $f) { totalCount } }""",
                       {"f": {"account": _is(a)}})
        assert got["operators"]["totalCount"] == 0  # a never registered
        got = api.data("""query($f: HeartbeatFilter) { heartbeats(filter: $f) { totalCount } }""",
                       {"f": {"account": _is(a), "epoch": {"greaterThan": 0}}})
        assert got["heartbeats"]["totalCount"] == 0

        # No index serves these: refused, naming the field, before any SQL runs.
        refused = {
            (EXTRINSICS_Q, '{"success": {"equalTo": true}}'): "filter.success: no index",
            (EXTRINSICS_Q, '{"call": {"equalTo": "remark"}}'): "filter.call: no index",
            (EVENTS_Q, '{"or": [{"pallet": {"equalTo": "Balances"}}, {"name": {"equalTo": '
                       '"Transfer"}}]}'): "filter.or[1].name: no index",
            (EXTRINSICS_Q, '{"success": {"equalTo": false}, "blockNumber": {"greaterThan": 0, '
                           '"lessThan": 5000}}'): "filter.success: no index",
            ("query($f: HeartbeatFilter) { heartbeats(filter: $f) { totalCount } }",
             '{"epoch": {"equalTo": 1}}'): "filter.epoch: no index",
        }
        for (query, f), message in refused.items():
            with api.counting() as sql:
                status, body = api.post(query, {"f": json.loads(f)})
            assert status == 200 and body["data"] is None, (f, status, body)
            messages = [e["message"] for e in body.get("errors") or []]
            assert any(message in m for m in messages), (f, body)
            assert sql == [], (f, sql)

        # Past the bound on index branches: refused with the cost (400), naming where the
        # filter overflowed, before any SQL runs.
        wide = {"and": [{"or": [{"to": _is(f"t{i}")} for i in range(15)]},
                        {"or": [{"from": _is(f"f{i}")} for i in range(15)]}]}
        with api.counting() as sql:
            status, body = api.post(TRANSFERS_Q, {"f": wide})
        messages = [e["message"] for e in body.get("errors") or []]
        assert status == 400 and body.get("data") is None and sql == [], (status, body, sql)
        assert any(m.startswith("transfers: filter.and[1]: the filter expands to 225 or more "
                                "index branches, at most 200") for m in messages), body
    finally:
        api.close()
        ix.stop()


def test_filter_rules_name_the_field_and_bound_the_input():
    def refused(spec: dict, value: object, message: str) -> None:
        with pytest.raises(QueryError, match=message):
            filters.compile_filter(spec, value)

    success = BooleanFilter(equal_to=True)
    refused(filters.EXTRINSICS, ExtrinsicFilter(success=success), r"^filter\.success: no index")
    refused(filters.EXTRINSICS, ExtrinsicFilter(or_=[ExtrinsicFilter(success=success)]),
            r"^filter\.or\[0\]\.success")
    refused(filters.EXTRINSICS, ExtrinsicFilter(
        success=success, block_number=IntFilter(greater_than=0, less_than=1002)),
        "filter.success")
    refused(filters.EVENTS, EventFilter(pallet=StringFilter(in_=[str(i) for i in range(101)])),
            r"filter\.pallet\.in: 101 values, at most 100")
    refused(filters.EVENTS, EventFilter(pallet=StringFilter()), "filter.pallet: give an op")
    refused(filters.HEARTBEATS, HeartbeatFilter(epoch=IntFilter(equal_to=3)), "filter.epoch")
    # A time range is a walk of the block-number key from the first block in it: it narrows
    # but does not serve a residual on its own.
    refused(filters.EVENTS, EventFilter(name=StringFilter(equal_to="Transfer"),
                                        timestamp=DatetimeFilter(greater_than=datetime.now(UTC))),
            "filter.name: no index")
    deep = EventFilter(pallet=StringFilter(equal_to="X"))
    for _ in range(5):
        deep = EventFilter(and_=[deep])
    refused(filters.EVENTS, deep, "nested deeper than 4")
    # A key in the same conjunction serves the residual, wherever it sits.
    for ok in (ExtrinsicFilter(success=success, signer=StringFilter(equal_to="5x")),
               ExtrinsicFilter(pallet=StringFilter(equal_to="Balances"),
                               or_=[ExtrinsicFilter(success=success),
                                    ExtrinsicFilter(call=StringFilter(equal_to="x"))]),
               ExtrinsicFilter(and_=[ExtrinsicFilter(pallet=StringFilter(equal_to="P"))],
                               call=StringFilter(equal_to="c")),
               ExtrinsicFilter(success=success, block_number=IntFilter(
                   greater_than_or_equal_to=10, less_than=1010))):
        filters.compile_filter(filters.EXTRINSICS, ok)

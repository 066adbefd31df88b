"""Pure parts of the indexer: fork decisions, cursors, query cost, decoding helpers, and the
storage functions on an in-memory database."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from graphql import parse
from sqlalchemy import create_engine

from ops_tools.services.common.db import Database
from ops_tools.services.indexer import queries, store
from ops_tools.services.indexer.decode import accounts_in, extrinsic_hash
from ops_tools.services.indexer.feed import CommitFeed
from ops_tools.services.indexer.forks import (
    ChainMoved,
    SettledFork,
    check_links,
    check_settled,
    common_ancestor,
    rollback_window,
)
from ops_tools.services.indexer.limits import COUNT_COST, READ_COST, Limits, query_cost
from ops_tools.services.indexer.model import Block, Event, RawBlock, Transfer
from ops_tools.services.indexer.schema import Health, build_schema
from ops_tools.services.indexer.tables import Base

ALICE = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"
BOB = "5FHneW46xGXgs5mUiveU4sbTyGBzmstUspZC92UhjJM694ty"


def raw(n: int, h: str, parent: str) -> RawBlock:
    return RawBlock(number=n, hash=h, parent_hash=parent, extrinsics=[], events=None,
                    spec_version=6)


def test_common_ancestor_is_the_highest_agreeing_number():
    stored = {5: "a5", 6: "a6", 7: "a7", 8: "a8"}
    assert common_ancestor(stored, {5: "a5", 6: "a6", 7: "b7", 8: "b8"}) == 6
    assert common_ancestor(stored, {5: "a5", 6: "a6", 7: "a7", 8: None}) == 7  # chain shorter
    assert common_ancestor(stored, {5: "b5", 6: "b6", 7: "b7", 8: "b8"}) is None


def test_rollback_window_never_goes_below_the_floor():
    assert list(rollback_window(10, 0, 4)) == [10, 9, 8, 7]
    assert list(rollback_window(10, 8, 64)) == [10, 9, 8]
    assert list(rollback_window(2, 0, 64)) == [2, 1, 0]


def test_a_rollback_below_the_recorded_finalized_block_is_a_settled_fork():
    check_settled(7, 7, "a7", "a7")  # the finalized block stays: an ordinary fork above it
    check_settled(7, -1, None, None)  # nothing finalized yet
    with pytest.raises(SettledFork, match=r"#8 a8, recorded as finalized.*#8 is b8.*#7"):
        check_settled(7, 8, "a8", "b8")
    with pytest.raises(SettledFork, match="#0"):
        check_settled(0, 3, "a3", None)  # the node's chain is shorter than the finalized block


def test_a_batch_must_extend_the_stored_tip():
    check_links("t", [raw(1, "a", "t"), raw(2, "b", "a")])
    with pytest.raises(ChainMoved, match="#2"):
        check_links("t", [raw(1, "a", "t"), raw(2, "b", "x")])
    with pytest.raises(ChainMoved, match="#1"):
        check_links("other", [raw(1, "a", "t")])


def test_cursors_round_trip_and_refuse_other_lists():
    cursor = queries.encode_cursor("event", [12, 3])
    assert queries.decode_cursor("event", cursor) == [12, 3]
    with pytest.raises(queries.QueryError, match="after:"):
        queries.decode_cursor("transfer", cursor)
    with pytest.raises(queries.QueryError, match="after: 'garbage'"):
        queries.decode_cursor("event", "garbage")


def test_query_cost_multiplies_page_sizes():
    limits = Limits(default_page_size=20, max_page_size=100)
    flat = parse("{ events(first: 10) { edges { cursor } } }").definitions[0]
    assert query_cost(flat.selection_set, {}, limits) == READ_COST + 10 * 2
    default = parse("{ events { edges { cursor } } }").definitions[0]
    assert query_cost(default.selection_set, {}, limits) == READ_COST + 20 * 2
    variable = parse("query($n: Int) { events(first: $n) { edges { cursor } } }").definitions[0]
    assert query_cost(variable.selection_set, {}, limits) == READ_COST + 100 * 2
    doc = parse("{ events(first: 5) { ...E } } fragment E on EventConnection { edges { cursor } }")
    fragments = {d.name.value: d for d in doc.definitions[1:]}
    assert query_cost(doc.definitions[0].selection_set, fragments, limits) == READ_COST + 5 * 2


def test_nested_reads_and_counts_are_weighted():
    limits = Limits()
    # events(99) → extrinsic → events(99): each nested read is charged once per parent item.
    attack = parse("{ events(first: 99) { edges { node { extrinsic { events(first: 99) { index "
                   "name } } } } } }").definitions[0]
    inner = READ_COST + 99 * 2
    assert query_cost(attack.selection_set, {}, limits) == READ_COST + 99 * (
        1 + 1 + READ_COST + inner)
    assert query_cost(attack.selection_set, {}, limits) > limits.max_cost
    counted = parse("{ transfers(first: 1) { totalCount totalCountCapped } }").definitions[0]
    assert query_cost(counted.selection_set, {}, limits) == READ_COST + 2 * COUNT_COST
    # A connection's counts and pageInfo are paid once, its edges once per item.
    page = parse("{ transfers(first: 50) { totalCount pageInfo { hasNextPage } edges { cursor "
                 "} } }").definitions[0]
    assert query_cost(page.selection_set, {}, limits) == (
        READ_COST + COUNT_COST + (1 + 1) + 50 * (1 + 1))


def test_a_filtered_list_is_paid_once_per_index_branch():
    """The cost rule counts the branches a filter expands to as the resolver reads them, from
    a literal or from a variable alike: an in of 100 accounts (either side: 200 index
    branches) with first: 100 is refused naming the cost, the limit and the branches."""
    schema = build_schema(Limits())
    per = READ_COST + 100 * (1 + 1 + 2)  # edges, node, from, to
    many = [f"a{i}" for i in range(100)]
    listed = ", ".join(f'"{a}"' for a in many)
    literal = ("{ transfers(first: 100, filter: {account: {in: [" + listed + "]}}) { edges { "
               "node { from to } } } }")
    variable = ("query($f: TransferFilter) { transfers(first: 100, filter: $f) { edges { node "
                "{ from to } } } }")
    for query, values in ((literal, None), (variable, {"f": {"account": {"in": many}}})):
        result = asyncio.run(schema.execute(query, variable_values=values))
        assert result.data is None and result.errors, result
        assert result.errors[0].message.startswith(
            f"query cost {200 * per} is over the limit 20000: the filter of transfers expands "
            f"to 200 index branches"), result.errors

    def cost(query: str, values: dict) -> int:
        # The cost of an allowed query, read off the refusal under a limit of 0.
        tight = build_schema(Limits(max_cost=0))
        message = asyncio.run(tight.execute(query, variable_values=values)).errors[0].message
        return int(message.split()[2])

    small = ("query($f: TransferFilter, $a: String) { transfers(first: 1, account: $a, "
             "filter: $f) { edges { cursor } } }")
    one = cost(small, {"f": None, "a": None})
    assert one == READ_COST + 2
    # Two or members, each an account either side; the account argument doubles them all;
    # identical members are read once; a nested events(first) of an extrinsic has no filter.
    two_accounts = {"or": [{"account": {"equalTo": "a"}}, {"account": {"equalTo": "b"}}]}
    assert cost(small, {"f": two_accounts, "a": None}) == 4 * one
    assert cost(small, {"f": two_accounts, "a": "c"}) == 8 * one
    assert cost(small, {"f": {"or": [{"to": {"equalTo": "a"}}] * 5}, "a": None}) == one
    events = ("query($f: EventFilter) { events(first: 2, filter: $f) { edges { node { "
              "extrinsic { events(first: 3) { index } } } } } }")
    base = cost(events, {"f": None})
    assert cost(events, {"f": {"account": {"in": ["a", "b", "c"]}}}) == 3 * base


def test_accounts_are_found_in_nested_event_fields():
    args = {"from": ALICE, "to": BOB, "amount": 5, "nested": {"who": [ALICE]},
            "note": "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQX"}  # bad checksum
    assert accounts_in(args) == [ALICE, BOB]


def test_extrinsic_hash_is_blake2_256_of_the_bytes():
    assert extrinsic_hash("0x") == (
        "0x0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8")


def _block(n: int, h: str, parent: str, transfers: int = 0) -> Block:
    events = [Event(index=i, extrinsic_index=None, phase="Finalization", pallet="Balances",
                    name="Transfer", args={"from": ALICE, "to": BOB, "amount": 1},
                    accounts=[ALICE, BOB]) for i in range(transfers)]
    return Block(number=n, hash=h, parent_hash=parent, spec_version=6, extrinsics=[],
                 events=events, transfers=[Transfer(i, None, None, ALICE, BOB, 10**30)
                                           for i in range(transfers)], heartbeats=[])


def test_store_rollback_deletes_everything_above_the_ancestor_and_resets_archive():
    engine = create_engine("sqlite://")
    Base.metadata.create_all(engine)
    with engine.begin() as c:
        net = store.ensure_network(c, "0xg1", "Test")
        assert net.created and net.reset_count == 0 and net.archived is None
        store.insert_blocks(c, net.id, [_block(0, "h0", "0x0"), _block(1, "h1", "h0", 2),
                                        _block(2, "h2", "h1", 1)])
        assert store.touched_above(c, net.id, 0) == ({ALICE, BOB}, set())
        assert store.rollback(c, net.id, 1) == 1
        assert store.tip(c, net.id) == (1, "h1")
        page = queries.transfers(c, net.id, 10, None, False, account=BOB, sender=None,
                                 recipient=None, low=None, high=None)
        assert [r.amount for r in page.rows] == [str(10**30)] * 2  # u128 kept exactly
        again = store.ensure_network(c, "0xg1", "Test")
        assert not again.created and again.id == net.id
        reset = store.ensure_network(c, "0xg2", "Test")
        assert reset.created and reset.reset_count == 1 and reset.id != net.id
        assert reset.archived == "0xg1"
        assert queries.network(c, None).genesis_hash == "0xg2"
        assert store.tip(c, net.id) == (1, "h1")  # the archived network keeps its rows
        with pytest.raises(queries.QueryError, match=r"genesisHash: 0xg3 .* known: 0xg1, 0xg2"):
            queries.network(c, "0xg3")


def test_indexer_healthy_needs_a_recent_step_within_the_lag_on_the_active_network():
    health = Health(stale_s=30, max_lag=5)
    now = datetime.now(UTC)

    def net(**kw: object) -> SimpleNamespace:
        values = {"active": True, "updated_at": now, "height": 100, "chain_height": 105} | kw
        return SimpleNamespace(**values)
    assert health.healthy(net())
    assert health.healthy(net(updated_at=now.replace(tzinfo=None)))  # SQLite's naive UTC
    assert not health.healthy(net(chain_height=106))
    assert not health.healthy(net(updated_at=now - timedelta(seconds=31)))
    assert not health.healthy(net(active=False))
    assert not health.healthy(net(updated_at=None))


def test_the_sqlite_feed_reads_nothing_while_idle_and_a_commit_meanwhile_wakes_the_next_wait(
        tmp_path) -> None:
    """No subscription waits: commits by another connection are not even read (the version
    stays). The next wait still learns of them at once, and a commit during a wait wakes it."""
    path = tmp_path / "indexer.db"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("CREATE TABLE t (x INTEGER)")

    def commit() -> None:
        writer.execute("INSERT INTO t VALUES (1)")

    async def scenario() -> None:
        feed = CommitFeed(Database(f"sqlite:///{path}"))
        feed.start()
        try:
            await feed.wait(-1, timeout=5)  # the poller's first reading
            await asyncio.sleep(0.2)
            idle = feed.version
            commit()
            await asyncio.sleep(0.3)  # six polls' worth: an idle feed reads none of them
            assert feed.version == idle, "the feed read the database with nobody waiting"
            woken = await asyncio.wait_for(feed.wait(idle, timeout=5), 2)
            assert woken != idle  # the commit made during the pause
            waiter = asyncio.create_task(feed.wait(woken, timeout=5))
            await asyncio.sleep(0.2)
            assert not waiter.done()
            commit()
            assert await asyncio.wait_for(waiter, 2) != woken
        finally:
            await feed.stop()

    try:
        asyncio.run(scenario())
    finally:
        writer.close()

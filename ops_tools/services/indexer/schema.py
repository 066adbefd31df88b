"""The GraphQL schema (Strawberry): status, blocks, extrinsics, events and the network's domain
(transfers, operators, heartbeats, accounts), each list a Relay-style connection."""

from __future__ import annotations

import asyncio
import enum
import json
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    Sequence,
)
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Annotated, Any, Generic, NewType, TypeVar

import strawberry
from graphql import (
    FieldNode,
    GraphQLError,
    GraphQLInputObjectType,
    GraphQLSchema,
    GraphQLString,
    value_from_ast,
)
from sqlalchemy import Connection as SAConnection
from strawberry.dataloader import DataLoader
from strawberry.extensions import (
    DisableIntrospection,
    MaskErrors,
    QueryDepthLimiter,
    SchemaExtension,
)
from strawberry.scalars import JSON
from strawberry.schema.config import StrawberryConfig
from strawberry.types import Info

from ops_tools import __version__
from ops_tools.services.common.clientip import Network
from ops_tools.services.indexer import filters, queries
from ops_tools.services.indexer.feed import CommitFeed
from ops_tools.services.indexer.limits import Limits, Refused, cost_rule
from ops_tools.services.indexer.queries import Page, QueryError, encode_cursor
from ops_tools.services.indexer.sockets import drop, peer

BigInt = NewType("BigInt", str)
SCALARS = {BigInt: strawberry.scalar(
    name="BigInt", serialize=str, parse_value=lambda v: str(int(v)),
    description="An unsigned integer of any size (plancks), as a decimal string.",
)}
T = TypeVar("T")


Read = Callable[[Callable[[SAConnection], Any]], Awaitable[Any]]
KEEPALIVE_S = 30.0


@dataclass
class Subscribers:
    """Open subscriptions, bounded per connection and per client address (shared by every
    connection of this API process)."""

    per_connection: int
    per_address: int
    max_backlog: int  # blocks a subscriber may fall behind before it is dropped
    send_timeout_s: float = 10.0  # a message's time to be sent before its subscriber is dropped
    trusted_proxies: Sequence[Network] = ()
    by_address: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Health:
    """When ``_metadata.indexerHealthy`` holds: the processor's last step (which every step
    records, with or without new blocks) at most ``stale_s`` ago, within ``max_lag`` blocks of
    the chain's best block (the processor's own readiness, read from the database)."""

    stale_s: float
    max_lag: int

    def healthy(self, net: Any) -> bool:
        if not net.active or net.updated_at is None:
            return False
        updated = net.updated_at
        if updated.tzinfo is None:  # SQLite keeps no zone; the processor writes UTC
            updated = updated.replace(tzinfo=UTC)
        age = (datetime.now(UTC) - updated).total_seconds()
        return age <= self.stale_s and net.chain_height - net.height <= self.max_lag


ExtrinsicKey = tuple[int, int, int]  # network id, block number, index


@dataclass
class Context:
    """One per request, and one per WebSocket connection: the loaders batch the per-item reads
    of nested fields, so that a nested page costs one SQL query per level, not one per item."""

    read: Read
    limits: Limits
    health: Health
    feed: CommitFeed | None = None
    subscribers: Subscribers | None = None
    open_subscriptions: int = field(default=0, init=False)
    extrinsics: DataLoader[ExtrinsicKey, Any] = field(init=False)
    extrinsic_events: DataLoader[tuple[int, int, int, int], list[Any]] = field(init=False)

    def __post_init__(self) -> None:
        # No cache: a WebSocket connection keeps its context for as long as it lives, and the
        # batching (one query per level and tick) is what bounds the SQL.
        self.extrinsics = DataLoader(load_fn=self._load_extrinsics, cache=False)
        self.extrinsic_events = DataLoader(load_fn=self._load_extrinsic_events, cache=False)

    async def _load_extrinsics(self, keys: list[ExtrinsicKey]) -> list[Any]:
        found: dict[ExtrinsicKey, Any] = {}
        for net, group in _grouped(keys).items():
            rows = await self.read(lambda c, n=net, g=group: queries.extrinsics_at(c, n, g))
            found.update({(net, *k): r for k, r in rows.items()})
        return [found.get(k) for k in keys]

    async def _load_extrinsic_events(self, keys: list[tuple[int, int, int, int]]
                                     ) -> list[list[Any]]:
        found: dict[tuple[int, int, int, int], list[Any]] = {}
        for (net, first), group in _grouped(keys, with_last=True).items():
            rows = await self.read(lambda c, n=net, g=group, f=first:
                                   queries.events_of_extrinsics(c, n, g, f))
            found.update({(net, *k, first): r for k, r in rows.items()})
        return [found[k] for k in keys]


def _grouped(keys: list[Any], *, with_last: bool = False) -> dict[Any, list[tuple[int, int]]]:
    """Keys grouped by network (and page size, the last element, when ``with_last``)."""
    groups: dict[Any, list[tuple[int, int]]] = {}
    for key in keys:
        group = (key[0], key[3]) if with_last else key[0]
        groups.setdefault(group, []).append((key[1], key[2]))
    return groups


def _ctx(info: Info) -> Context:
    return info.context["indexer"]


def _first(info: Info, first: int | None) -> int:
    limits = _ctx(info).limits
    if first is None:
        return limits.default_page_size
    if not 1 <= first <= limits.max_page_size:
        raise QueryError(f"first: {first} is outside 1..{limits.max_page_size}; ask for at most "
                         f"{limits.max_page_size} and page with after")
    return first


@strawberry.enum
class Order(enum.Enum):
    ASC = "asc"
    DESC = "desc"


@strawberry.enum(description="The order of a list: by block, and within a block by the "
                             "item's index (the stable tie-break the cursors follow).")
class OrderBy(enum.Enum):
    BLOCK_NUMBER_ASC = "block_number_asc"
    BLOCK_NUMBER_DESC = "block_number_desc"


def _desc(order: Order, order_by: OrderBy | None) -> bool:
    if order_by is None:
        return order is Order.DESC
    if order is Order.DESC and order_by is OrderBy.BLOCK_NUMBER_ASC:
        raise QueryError("orderBy: BLOCK_NUMBER_ASC contradicts order: DESC; pass one of them")
    return order_by is OrderBy.BLOCK_NUMBER_DESC


@strawberry.input(description="Conditions on a text field (SubQuery's names).")
class StringFilter:
    equal_to: str | None = None
    in_: list[str] | None = strawberry.field(name="in", default=None)


@strawberry.input(description="Conditions on a number field (SubQuery's names); several "
                              "are all required.")
class IntFilter:
    equal_to: int | None = None
    in_: list[int] | None = strawberry.field(name="in", default=None)
    greater_than: int | None = None
    greater_than_or_equal_to: int | None = None
    less_than: int | None = None
    less_than_or_equal_to: int | None = None


@strawberry.input
class BooleanFilter:
    equal_to: bool | None = None


@strawberry.input(description="Conditions on a block's time (ISO 8601; without a zone, UTC), "
                              "SubQuery's names; several are all required.")
class DatetimeFilter:
    equal_to: datetime | None = None
    in_: list[datetime] | None = strawberry.field(name="in", default=None)
    greater_than: datetime | None = None
    greater_than_or_equal_to: datetime | None = None
    less_than: datetime | None = None
    less_than_or_equal_to: datetime | None = None


_TIME = "The block's time (Timestamp.Now)."


@strawberry.input(description="Blocks: by number, hash, time.")
class BlockFilter:
    number: IntFilter | None = None
    hash: StringFilter | None = None
    timestamp: DatetimeFilter | None = strawberry.field(default=None, description=_TIME)
    and_: list[BlockFilter] | None = strawberry.field(name="and", default=None)
    or_: list[BlockFilter] | None = strawberry.field(name="or", default=None)


@strawberry.input(description="Heartbeats: epoch needs account or a block range of at most "
                              "1000 blocks.")
class HeartbeatFilter:
    account: StringFilter | None = None
    epoch: IntFilter | None = None
    block_number: IntFilter | None = None
    timestamp: DatetimeFilter | None = strawberry.field(default=None, description=_TIME)
    and_: list[HeartbeatFilter] | None = strawberry.field(name="and", default=None)
    or_: list[HeartbeatFilter] | None = strawberry.field(name="or", default=None)


@strawberry.input(description="Operators: by account (their key; other fields have no index).")
class OperatorFilter:
    account: StringFilter | None = None
    and_: list[OperatorFilter] | None = strawberry.field(name="and", default=None)
    or_: list[OperatorFilter] | None = strawberry.field(name="or", default=None)


@strawberry.input(description="Accounts: by address (their key; balances have no index).")
class AccountFilter:
    address: StringFilter | None = None
    and_: list[AccountFilter] | None = strawberry.field(name="and", default=None)
    or_: list[AccountFilter] | None = strawberry.field(name="or", default=None)


@strawberry.input(description="Transfers: by sender, recipient, either, block range.")
class TransferFilter:
    from_: StringFilter | None = strawberry.field(name="from", default=None)
    to: StringFilter | None = None
    account: StringFilter | None = strawberry.field(
        default=None, description="Sender or recipient.")
    block_number: IntFilter | None = None
    timestamp: DatetimeFilter | None = strawberry.field(default=None, description=_TIME)
    and_: list[TransferFilter] | None = strawberry.field(name="and", default=None)
    or_: list[TransferFilter] | None = strawberry.field(name="or", default=None)


@strawberry.input(description="Extrinsics: call needs pallet; success needs signer, pallet, "
                              "hash or a block range of at most 1000 blocks.")
class ExtrinsicFilter:
    signer: StringFilter | None = None
    pallet: StringFilter | None = None
    call: StringFilter | None = None
    success: BooleanFilter | None = None
    hash: StringFilter | None = None
    block_number: IntFilter | None = None
    timestamp: DatetimeFilter | None = strawberry.field(default=None, description=_TIME)
    and_: list[ExtrinsicFilter] | None = strawberry.field(name="and", default=None)
    or_: list[ExtrinsicFilter] | None = strawberry.field(name="or", default=None)


@strawberry.input(description="Events: name needs pallet or a block range of at most 1000 "
                              "blocks; account is any account the event names.")
class EventFilter:
    pallet: StringFilter | None = None
    name: StringFilter | None = None
    account: StringFilter | None = None
    block_number: IntFilter | None = None
    timestamp: DatetimeFilter | None = strawberry.field(default=None, description=_TIME)
    and_: list[EventFilter] | None = strawberry.field(name="and", default=None)
    or_: list[EventFilter] | None = strawberry.field(name="or", default=None)


@strawberry.type
class PageInfo:
    has_next_page: bool
    has_previous_page: bool
    start_cursor: str | None
    end_cursor: str | None


@strawberry.type
class Edge(Generic[T]):
    node: T
    cursor: str


@asynccontextmanager
async def _subscription(info: Info) -> AsyncIterator[Subscribers]:
    """Counts the subscription against its connection's and its address's limits."""
    ctx = _ctx(info)
    subs, ws = ctx.subscribers, info.context.get("request")
    if subs is None or ctx.feed is None:
        raise QueryError("subscriptions are served over WebSocket (graphql-transport-ws) only")
    # Behind nginx every peer is the proxy: the client is in X-Forwarded-For.
    address = "unknown" if ws is None else peer(ws, subs.trusted_proxies)
    if ctx.open_subscriptions >= subs.per_connection:
        raise QueryError(f"subscriptions: {ctx.open_subscriptions} open on this connection, at "
                         f"most {subs.per_connection}; complete one or open another connection")
    if subs.by_address.get(address, 0) >= subs.per_address:
        raise QueryError(f"subscriptions: {subs.by_address[address]} open from {address}, at "
                         f"most {subs.per_address}; complete some first")
    ctx.open_subscriptions += 1
    subs.by_address[address] = subs.by_address.get(address, 0) + 1
    try:
        yield subs
    finally:
        ctx.open_subscriptions -= 1
        subs.by_address[address] -= 1
        if not subs.by_address[address]:
            del subs.by_address[address]


_REMOVED = ("true only in a subscription's message withdrawing an item it sent before, "
            "whose block left the chain (a fork rolled it back)")


async def _follow(info: Info, kind: str,
                  read_new: Callable[[SAConnection, int, int, int, str | None], Page]
                  ) -> AsyncIterator[tuple[Any, Any, bool]]:
    """(row, network, removed) of every item of the blocks the processor commits from now on,
    in order, woken by the commit (feed.py); a reset goes on with the new chain from its
    genesis. The items of blocks above the finalized height are kept with the hash their block
    had when they were read: when that block leaves the chain (a rollback), each is sent again
    with ``removed`` true, newest first, before the new branch's items. A subscriber more than
    ``max_backlog`` blocks behind (it reads slower than blocks arrive) is dropped: its
    connection is closed with ``sockets.SLOW_CONSUMER_CLOSE`` (4419)."""
    ctx = _ctx(info)
    assert ctx.feed is not None
    async with _subscription(info) as subs:
        seen = ctx.feed.version
        net = await ctx.read(lambda c: queries.network(c, None))
        genesis, last = net.genesis_hash, net.height
        # block number -> (its hash when read, the items sent of it); unfinalized blocks only.
        sent: dict[int, tuple[str, list[Any]]] = {}
        while True:
            seen = await ctx.feed.wait(seen, KEEPALIVE_S)
            span = (min(sent), max(sent)) if sent else None

            def look(c: SAConnection, span: tuple[int, int] | None = span,
                     ) -> tuple[Any, dict[int, str]]:
                n = queries.network(c, None)
                return n, ({} if span is None else queries.block_hashes(c, n.id, *span))
            net, now = await ctx.read(look)
            if net.genesis_hash != genesis:
                genesis, last, sent = net.genesis_hash, -1, {}
            gone = sorted((b for b, (h, _) in sent.items() if now.get(b) != h), reverse=True)
            if gone:
                for number in sorted(sent, reverse=True):
                    if number < gone[-1]:
                        break
                    for row in reversed(sent.pop(number)[1]):
                        yield row, net, True
                last = gone[-1] - 1
            for number in [b for b in sent if b <= net.finalized_height]:
                del sent[number]  # settled: never withdrawn
            while len(sent) > subs.max_backlog:  # finality stalled: keep the newest blocks
                del sent[min(sent)]
            if net.height <= last:
                last = net.height  # a rollback with nothing sent of it: the new branch follows
                continue
            if net.height - last > subs.max_backlog:
                ws = info.context.get("request")
                if ws is not None:
                    await drop(ws, f"{net.height - last} blocks behind", subs.send_timeout_s,
                               peer(ws, subs.trusted_proxies))
                return
            lo, hi = last + 1, net.height
            # The hashes before the items: a rollback between the two reads shows at the next
            # wake as a changed hash, and what was read of it is withdrawn then.
            hashes = await ctx.read(lambda c, n=net, a=lo, b=hi: queries.block_hashes(
                c, n.id, max(a, n.finalized_height + 1), b))
            after: str | None = None
            while True:
                page = await ctx.read(lambda c, a=after, n=net, a0=lo, b=hi: read_new(
                    c, n.id, a0, b, a))
                for row in page.rows:
                    number = row.number if kind == "block" else row.block_number
                    if number in hashes:
                        sent.setdefault(number, (hashes[number], []))[1].append(row)
                    yield row, net, False
                if not page.has_next:
                    break
                after = encode_cursor(kind, page.keys[-1])
            for number, block_hash in hashes.items():  # blocks sent with nothing in them
                sent.setdefault(number, (block_hash, []))
            last = hi


@strawberry.type
class Subscription:
    @strawberry.subscription(description="Every block, as the processor commits it.")
    async def new_blocks(self, info: Info) -> AsyncGenerator[Block, None]:
        n = _ctx(info).limits.max_page_size
        async for row, net, removed in _follow(info, "block", lambda c, net, lo, hi, a:
                                               queries.blocks(c, net, n, a, False, lo, hi)):
            yield _block(row, net, removed)

    @strawberry.subscription(description="New transfers (all, or those the filter matches).")
    async def transfers(self, info: Info, filter: TransferFilter | None = None,
                        ) -> AsyncGenerator[Transfer, None]:
        where = filters.compile_branches(filters.TRANSFERS, filter, ranged=True)
        n = _ctx(info).limits.max_page_size
        async for row, _net, removed in _follow(
                info, "transfer", lambda c, net, lo, hi, a: queries.transfers(
                    c, net, n, a, False, account=None, sender=None, recipient=None, low=lo,
                    high=hi, where=where)):
            yield _transfer(row, removed)

    @strawberry.subscription(description="New events (all, or those the filter matches).")
    async def events(self, info: Info, filter: EventFilter | None = None,
                     ) -> AsyncGenerator[Event, None]:
        branches = filters.branches(filters.EVENTS, filter, ranged=True)
        where, joined = [b.where for b in branches], [b.joined for b in branches]
        n = _ctx(info).limits.max_page_size
        async for row, _net, removed in _follow(
                info, "event", lambda c, net, lo, hi, a: queries.events(
                    c, net, n, a, False, pallet=None, name=None, account=None, low=lo, high=hi,
                    where=where, joined=joined)):
            yield _event(row, removed)

    @strawberry.subscription(name="indexStatus",
                             description="The active network's status after every commit.")
    async def index_status(self, info: Info) -> AsyncGenerator[IndexStatus, None]:
        ctx = _ctx(info)
        async with _subscription(info):
            assert ctx.feed is not None
            seen, last = ctx.feed.version, None
            while True:
                net = await ctx.read(lambda c: queries.network(c, None))
                status = _status(net)
                if status != last:
                    last = status
                    yield status
                seen = await ctx.feed.wait(seen, KEEPALIVE_S)


class Counter:
    """The count of a list, run only when ``totalCount`` or ``totalCountCapped`` is asked for,
    and once for both."""

    def __init__(self, run: Callable[[], Awaitable[tuple[int, bool]]]) -> None:
        self._run = run
        self._task: asyncio.Task[tuple[int, bool]] | None = None

    async def get(self) -> tuple[int, bool]:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())
        return await self._task


@strawberry.type
class Connection(Generic[T]):
    edges: list[Edge[T]]
    page_info: PageInfo
    counter: strawberry.Private[Counter]

    @strawberry.field(description="How many items the list's filter matches (every page), up "
                                  "to the count cap; see totalCountCapped.")
    async def total_count(self) -> int:
        return (await self.counter.get())[0]

    @strawberry.field(description="True when there are more items than the count cap: "
                                  "totalCount is then the cap, a lower bound.")
    async def total_count_capped(self) -> bool:
        return (await self.counter.get())[1]


def _connection(info: Info, kind: str, page: Page, make: Callable[[Any], Any],
                exact: int | None = None) -> Connection[Any]:
    """``exact``: the count when it is known without counting (blocks)."""
    ctx = _ctx(info)

    async def run() -> tuple[int, bool]:
        if exact is not None:
            return exact, False
        return await ctx.read(lambda c: queries.count(c, page, ctx.limits.count_cap))

    cursors = [encode_cursor(kind, k) for k in page.keys]
    edges = [Edge(node=make(r), cursor=c) for r, c in zip(page.rows, cursors, strict=True)]
    return Connection(edges=edges, counter=Counter(run), page_info=PageInfo(
        has_next_page=page.has_next, has_previous_page=page.has_previous,
        start_cursor=cursors[0] if cursors else None,
        end_cursor=cursors[-1] if cursors else None))


@strawberry.type
class IndexStatus:
    height: int = strawberry.field(description="Highest indexed block (-1 before the genesis).")
    hash: str | None
    finalized_height: int
    finalized_hash: str | None
    chain_height: int
    lag: int
    genesis_hash: str
    chain_name: str | None
    spec_version: int | None
    reset_count: int
    active: bool
    updated_at: str | None


def _status(net: Any) -> IndexStatus:
    return IndexStatus(
        height=net.height, hash=net.hash, finalized_height=net.finalized_height,
        finalized_hash=net.finalized_hash, chain_height=net.chain_height,
        lag=max(net.chain_height - net.height, 0), genesis_hash=net.genesis_hash,
        chain_name=net.chain_name, spec_version=net.spec_version, reset_count=net.reset_count,
        active=net.active, updated_at=net.updated_at.isoformat() if net.updated_at else None)


@strawberry.type
class TableEstimate:
    table: str
    estimate: int


@strawberry.type(name="_Metadata", description="SubQuery's status object, with its field names.")
class Metadata:
    last_processed_height: int = strawberry.field(description="indexStatus.height")
    last_processed_timestamp: str | None = strawberry.field(
        description="When the processor last recorded its progress: milliseconds since the "
                    "epoch, as a decimal string (as SubQuery).")
    target_height: int = strawberry.field(description="The chain's best block the processor "
                                                      "last saw (indexStatus.chainHeight).")
    chain: str | None = strawberry.field(description="The chain's name (system_chain).")
    spec_name: str | None
    genesis_hash: str
    indexer_healthy: bool = strawberry.field(
        description="The processor's last step was recent and left it within ready_max_lag "
                    "blocks of the chain (always false for an archived network).")
    indexer_node_version: str
    query_node_version: str
    row_count_estimate: list[TableEstimate] = strawberry.field(
        description="Rows per table (all networks), from the database's statistics.")


@strawberry.type
class Block:
    number: int
    hash: str
    parent_hash: str
    spec_version: int
    extrinsic_count: int
    event_count: int
    finalized: bool
    timestamp: datetime | None = strawberry.field(
        description="The block's time (Timestamp.Now), UTC; null where the chain keeps none.")
    removed: bool = strawberry.field(default=False, description=_REMOVED)


def _block(row: Any, net: Any, removed: bool = False) -> Block:
    stamp = (None if row.timestamp is None
             else datetime.fromtimestamp(row.timestamp / 1000, tz=UTC))
    return Block(number=row.number, hash=row.hash, parent_hash=row.parent_hash,
                 spec_version=row.spec_version, extrinsic_count=row.extrinsic_count,
                 event_count=row.event_count,
                 finalized=row.number <= net.finalized_height and not removed,
                 timestamp=stamp, removed=removed)


@strawberry.type
class Extrinsic:
    network_id: strawberry.Private[int]
    block_number: int
    index: int
    hash: str
    signer: str | None
    pallet: str
    call: str
    args: JSON
    success: bool
    fee: BigInt | None
    error: JSON | None

    @strawberry.field(description="The events this extrinsic emitted.")
    async def events(self, info: Info, first: int | None = None) -> list[Event]:
        rows = await _ctx(info).extrinsic_events.load(
            (self.network_id, self.block_number, self.index, _first(info, first)))
        return [_event(r) for r in rows]


def _extrinsic(row: Any) -> Extrinsic:
    return Extrinsic(network_id=row.network_id, block_number=row.block_number, index=row.idx,
                     hash=row.hash, signer=row.signer, pallet=row.pallet, call=row.call,
                     args=json.loads(row.args), success=row.success, fee=row.fee,
                     error=json.loads(row.error) if row.error else None)


@strawberry.type
class Event:
    network_id: strawberry.Private[int]
    block_number: int
    index: int
    extrinsic_index: int | None
    phase: str
    pallet: str
    name: str
    args: JSON
    removed: bool = strawberry.field(default=False, description=_REMOVED)

    @strawberry.field(description="The extrinsic that emitted it (none for block hooks).")
    async def extrinsic(self, info: Info) -> Extrinsic | None:
        if self.extrinsic_index is None:
            return None
        row = await _ctx(info).extrinsics.load(
            (self.network_id, self.block_number, self.extrinsic_index))
        return _extrinsic(row) if row else None


def _event(row: Any, removed: bool = False) -> Event:
    return Event(network_id=row.network_id, block_number=row.block_number, index=row.idx,
                 extrinsic_index=row.extrinsic_idx, phase=row.phase, pallet=row.pallet,
                 name=row.name, args=json.loads(row.args), removed=removed)


@strawberry.type
class Transfer:
    from_: str = strawberry.field(name="from")
    to: str
    amount: BigInt
    block_number: int
    event_index: int
    extrinsic_hash: str | None
    removed: bool = strawberry.field(default=False, description=_REMOVED)


def _transfer(r: Any, removed: bool = False) -> Transfer:
    return Transfer(from_=r.sender, to=r.recipient, amount=r.amount, block_number=r.block_number,
                    event_index=r.event_idx, extrinsic_hash=r.extrinsic_hash, removed=removed)


@strawberry.type
class Operator:
    account: str
    stake: BigInt
    attestation_hash: str
    last_heartbeat_epoch: int
    registered_at: int = strawberry.field(description="Block of the registration.")
    as_of_block: int


@strawberry.type
class Heartbeat:
    account: str
    epoch: int
    block_number: int
    event_index: int
    extrinsic_hash: str | None


@strawberry.type
class Account:
    address: str
    free: BigInt
    reserved: BigInt
    frozen: BigInt
    nonce: int
    as_of_block: int


@strawberry.type
class Query:
    @strawberry.field(description="How far the index is, and of which network.")
    async def index_status(self, info: Info, genesis_hash: str | None = None) -> IndexStatus:
        net = await _ctx(info).read(lambda c: queries.network(c, genesis_hash))
        return _status(net)

    @strawberry.field(name="_metadata", description="SubQuery's _metadata: the same figures "
                                                    "as indexStatus, under SubQuery's names.")
    async def metadata(self, info: Info, genesis_hash: str | None = None) -> Metadata:
        ctx = _ctx(info)
        net, estimates = await ctx.read(lambda c: (queries.network(c, genesis_hash),
                                                   queries.row_estimates(c)))
        stamp = None
        if net.updated_at is not None:
            updated = net.updated_at if net.updated_at.tzinfo else net.updated_at.replace(
                tzinfo=UTC)
            stamp = str(int(updated.timestamp() * 1000))
        return Metadata(
            last_processed_height=net.height, last_processed_timestamp=stamp,
            target_height=net.chain_height, chain=net.chain_name, spec_name=net.spec_name,
            genesis_hash=net.genesis_hash, indexer_healthy=ctx.health.healthy(net),
            indexer_node_version=__version__, query_node_version=__version__,
            row_count_estimate=[TableEstimate(table=t, estimate=n) for t, n in estimates])

    @strawberry.field(description="Every network indexed, the current one and those archived "
                                  "by resets.")
    async def networks(self, info: Info) -> list[IndexStatus]:
        return [_status(n) for n in await _ctx(info).read(queries.networks)]

    @strawberry.field
    async def block(self, info: Info, number: int | None = None, hash: str | None = None,
                    genesis_hash: str | None = None) -> Block | None:
        if number is None and hash is None:
            raise QueryError("block: pass number or hash")

        def read(c: SAConnection) -> Block | None:
            net = queries.network(c, genesis_hash)
            row = queries.block(c, net.id, number, hash)
            return _block(row, net) if row else None
        return await _ctx(info).read(read)

    @strawberry.field
    async def blocks(self, info: Info, first: int | None = None, after: str | None = None,
                     order: Order = Order.ASC, from_block: int | None = None,
                     to_block: int | None = None,
                     genesis_hash: str | None = None,
                     filter: BlockFilter | None = None,
                     order_by: OrderBy | None = None) -> Connection[Block]:
        n = _first(info, first)
        where = filters.compile_branches(filters.BLOCKS, filter)
        desc = _desc(order, order_by)

        def read(c: SAConnection) -> Connection[Block]:
            net = queries.network(c, genesis_hash)
            page = queries.blocks(c, net.id, n, after, desc, from_block, to_block, where)
            # Without a filter the count is arithmetic; with one it is counted (capped).
            exact = None if filter is not None else queries.block_count(net, from_block,
                                                                        to_block)
            return _connection(info, "block", page, lambda r: _block(r, net), exact=exact)
        return await _ctx(info).read(read)

    @strawberry.field
    async def extrinsics(self, info: Info, first: int | None = None, after: str | None = None,
                         order: Order = Order.ASC, pallet: str | None = None,
                         call: str | None = None,
                         account: Annotated[str | None, strawberry.argument(
                             description="The signer (ss58).")] = None,
                         success: bool | None = None, hash: str | None = None,
                         from_block: int | None = None, to_block: int | None = None,
                         genesis_hash: str | None = None,
                         filter: ExtrinsicFilter | None = None,
                         order_by: OrderBy | None = None) -> Connection[Extrinsic]:
        n = _first(info, first)
        where = filters.compile_branches(filters.EXTRINSICS, filter)
        desc = _desc(order, order_by)

        def read(c: SAConnection) -> Connection[Extrinsic]:
            net = queries.network(c, genesis_hash)
            page = queries.extrinsics(c, net.id, n, after, desc, pallet=pallet,
                                      call=call, account=account, success=success,
                                      low=from_block, high=to_block, hash_=hash, where=where)
            return _connection(info, "extrinsic", page, _extrinsic)
        return await _ctx(info).read(read)

    @strawberry.field
    async def events(self, info: Info, first: int | None = None, after: str | None = None,
                     order: Order = Order.ASC, pallet: str | None = None,
                     name: str | None = None,
                     account: Annotated[str | None, strawberry.argument(
                         description="An account (ss58) the event names.")] = None,
                     from_block: int | None = None, to_block: int | None = None,
                     genesis_hash: str | None = None,
                     filter: EventFilter | None = None,
                     order_by: OrderBy | None = None) -> Connection[Event]:
        n = _first(info, first)
        branches = filters.branches(filters.EVENTS, filter)
        where, joined = [b.where for b in branches], [b.joined for b in branches]
        desc = _desc(order, order_by)

        def read(c: SAConnection) -> Connection[Event]:
            net = queries.network(c, genesis_hash)
            page = queries.events(c, net.id, n, after, desc, pallet=pallet, name=name,
                                  account=account, low=from_block, high=to_block, where=where,
                                  joined=joined)
            return _connection(info, "event", page, _event)
        return await _ctx(info).read(read)

    @strawberry.field(description="Balances.Transfer events.")
    async def transfers(self, info: Info, first: int | None = None, after: str | None = None,
                        order: Order = Order.ASC,
                        account: Annotated[str | None, strawberry.argument(
                            description="Sender or recipient (ss58).")] = None,
                        from_: Annotated[str | None, strawberry.argument(name="from")] = None,
                        to: str | None = None, from_block: int | None = None,
                        to_block: int | None = None,
                        genesis_hash: str | None = None,
                        filter: TransferFilter | None = None,
                        order_by: OrderBy | None = None) -> Connection[Transfer]:
        n = _first(info, first)
        where = filters.compile_branches(filters.TRANSFERS, filter)
        desc = _desc(order, order_by)

        def read(c: SAConnection) -> Connection[Transfer]:
            net = queries.network(c, genesis_hash)
            page = queries.transfers(c, net.id, n, after, desc, account=account, sender=from_,
                                     recipient=to, low=from_block, high=to_block, where=where)
            return _connection(info, "transfer", page, _transfer)
        return await _ctx(info).read(read)

    @strawberry.field(description="Registered operators as OperatorStake.Operators holds them "
                                  "at the last indexed block that touched them.")
    async def operators(self, info: Info, first: int | None = None, after: str | None = None,
                        order: Order = Order.ASC, account: str | None = None,
                        genesis_hash: str | None = None,
                        filter: OperatorFilter | None = None) -> Connection[Operator]:
        n = _first(info, first)
        where = filters.compile_filter(filters.OPERATOR_RECORDS, filter)

        def read(c: SAConnection) -> Connection[Operator]:
            net = queries.network(c, genesis_hash)
            page = queries.operators(c, net.id, n, after, order is Order.DESC, account=account,
                                     where=where)
            return _connection(info, "operator", page, lambda r: Operator(
                account=r.account, stake=r.stake, attestation_hash=r.attestation_hash,
                last_heartbeat_epoch=r.last_heartbeat_epoch, registered_at=r.registered_at,
                as_of_block=r.block_number))
        return await _ctx(info).read(read)

    @strawberry.field(description="OperatorStake.HeartbeatReceived events.")
    async def heartbeats(self, info: Info, first: int | None = None, after: str | None = None,
                         order: Order = Order.ASC, account: str | None = None,
                         from_block: int | None = None, to_block: int | None = None,
                         genesis_hash: str | None = None,
                         filter: HeartbeatFilter | None = None,
                         order_by: OrderBy | None = None) -> Connection[Heartbeat]:
        n = _first(info, first)
        where = filters.compile_branches(filters.HEARTBEATS, filter)
        desc = _desc(order, order_by)

        def read(c: SAConnection) -> Connection[Heartbeat]:
            net = queries.network(c, genesis_hash)
            page = queries.heartbeats(c, net.id, n, after, desc, account=account,
                                      low=from_block, high=to_block, where=where)
            return _connection(info, "heartbeat", page, lambda r: Heartbeat(
                account=r.account, epoch=r.epoch, block_number=r.block_number,
                event_index=r.event_idx, extrinsic_hash=r.extrinsic_hash))
        return await _ctx(info).read(read)

    @strawberry.field(description="Balances (System.Account) as of the last indexed block.")
    async def accounts(self, info: Info, first: int | None = None, after: str | None = None,
                       order: Order = Order.ASC, address: str | None = None,
                       genesis_hash: str | None = None,
                       filter: AccountFilter | None = None) -> Connection[Account]:
        n = _first(info, first)
        where = filters.compile_filter(filters.ACCOUNTS, filter)

        def read(c: SAConnection) -> Connection[Account]:
            net = queries.network(c, genesis_hash)
            page = queries.accounts(c, net.id, n, after, order is Order.DESC, address=address,
                                    where=where)
            return _connection(info, "account", page, lambda r: Account(
                address=r.address, free=r.free, reserved=r.reserved, frozen=r.frozen,
                nonce=r.nonce, as_of_block=r.block_number))
        return await _ctx(info).read(read)


def _masked(error: GraphQLError) -> bool:
    """Errors of the query (bad arguments, limits) are shown; anything else is an internal
    failure whose text is not the client's business."""
    original = error.original_error
    return original is not None and not isinstance(original, QueryError | GraphQLError)


#: The lists whose filter is read as index branches (filters.branches), by field name, with the
#: name of the filter's input type.
BRANCHED = {"transfers": (filters.TRANSFERS, "TransferFilter"),
            "events": (filters.EVENTS, "EventFilter"),
            "extrinsics": (filters.EXTRINSICS, "ExtrinsicFilter"),
            "heartbeats": (filters.HEARTBEATS, "HeartbeatFilter"),
            "blocks": (filters.BLOCKS, "BlockFilter")}


def count_branches(schema: GraphQLSchema, node: FieldNode, variables: dict[str, Any]) -> int:
    """The index branches a list's arguments make, as its resolver will read them: its
    filter's (filters.count_branches), twice for ``transfers``' ``account`` argument (both
    sides). An argument GraphQL will refuse counts 1 (the refusal is what the client gets); a
    filter past the branches' bound is refused with the cost (400, before any SQL)."""
    spec, type_name = BRANCHED.get(node.name.value, (None, ""))
    if spec is None:
        return 1
    n = 1
    for arg in node.arguments or ():
        name = arg.name.value
        if name == "filter":
            input_type = schema.get_type(type_name)
            raw = (value_from_ast(arg.value, input_type, variables)
                   if isinstance(input_type, GraphQLInputObjectType) else None)
            if isinstance(raw, dict):
                try:
                    n *= filters.count_branches(spec, filters.from_graphql(spec, raw))
                except filters.TooManyBranches as exc:
                    raise Refused(str(exc)) from None
        elif name == "account" and node.name.value == "transfers":
            n *= 1 if value_from_ast(arg.value, GraphQLString, variables) is None else 2
    return n


class CostLimit(SchemaExtension):
    """The cost rule (limits.py) with this operation's variables: a filter passed as a variable
    is paid for its branches as one written in the query is."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits

    def on_operation(self) -> Iterator[None]:
        ctx = self.execution_context
        ctx.validation_rules = (*ctx.validation_rules,
                                cost_rule(self.limits, ctx.variables, count_branches))
        yield


def build_schema(limits: Limits, *, introspection: bool = True) -> strawberry.Schema:
    # Extensions as factories: strawberry makes each request its own.
    return strawberry.Schema(query=Query, subscription=Subscription,
                             config=StrawberryConfig(scalar_map=SCALARS), extensions=[
        *([] if introspection else [DisableIntrospection]),
        partial(QueryDepthLimiter, max_depth=limits.max_depth),
        partial(CostLimit, limits),
        partial(MaskErrors, should_mask_error=_masked,
                error_message="internal error of the indexer; see its log"),
    ])

"""The processor: follows a node over RPC and writes the index.

Catch-up fetches batches of blocks (hashes, blocks, events and runtime versions as JSON-RPC
batches) several batches ahead while the current one is decoded and written in one bulk
transaction; then it follows new heads by subscription. Before every step it checks the genesis
(a reset archives the old network and starts the new one from its genesis) and that the stored
tip is still on the node's best chain (a fork rolls back to the common ancestor).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from scalecodec.utils.ss58 import ss58_decode, ss58_encode
from sqlalchemy import Connection
from sqlalchemy.orm import Session

from ops_tools.chain.aio import RpcClient, RpcError
from ops_tools.chainspec.hashing import blake2_128_concat, storage_prefix
from ops_tools.services.indexer import store
from ops_tools.services.indexer.decode import Runtime, decode_block
from ops_tools.services.indexer.forks import (
    ChainMoved,
    SettledFork,
    check_links,
    check_settled,
    common_ancestor,
    rollback_window,
)
from ops_tools.services.indexer.model import Block, RawBlock

log = logging.getLogger("net.indexer.processor")

EVENTS_KEY = "0x" + storage_prefix("System", "Events").hex()
#: pallet_timestamp's time of the block (u64 ms), what indexers give as the block's time.
TIMESTAMP_KEY = "0x" + storage_prefix("Timestamp", "Now").hex()
ACCOUNT_PREFIX = storage_prefix("System", "Account")
OPERATOR_PREFIX = storage_prefix("OperatorStake", "Operators")
KEYS_PAGE = 1000
DECODED_KEPT = 8  # decoded metadata kept across genesis changes
FETCH_QUEUED = 3  # batches fetched or queued ahead of decoding, per batch in flight
WRITE_BACKLOG = 4  # write groups decoded ahead of a running write, at most
T = TypeVar("T")


class Writable(Protocol):
    def session(self, *, write: bool = False) -> AbstractContextManager[Session]: ...


@dataclass(frozen=True)
class LinkLost:
    """Why the processor is not connected to the node (its own /ready)."""

    at: float  # time.monotonic()
    reason: str


@dataclass(frozen=True)
class StepReport:
    """What the last completed step saw (the processor's own /ready)."""

    at: float  # time.monotonic()
    genesis_hash: str
    reset_count: int
    height: int
    chain_height: int
    finalized_height: int


@dataclass
class ProcessorOptions:
    rpc_url: str
    batch_size: int = 100
    fetch_ahead: int = 4
    write_batches: int = 5  # batches per write transaction while far behind
    poll_interval_s: float = 6.0
    # Reconnecting after a lost connection: the first retry soon (a reset's node restart takes
    # a second or two), then doubling up to the maximum.
    retry_min_s: float = 0.2
    retry_max_s: float = 1.0
    # The step's head queries (genesis, best, finalized): short, so that a node that stopped
    # answering is given up on quickly; catch-up batches keep the client's longer timeout.
    head_timeout_s: float = 10.0
    ss58_format: int = 42


@functools.lru_cache(maxsize=65536)  # the same accounts are read again in every write group
def _storage_key(prefix: bytes, address: str) -> str:
    return "0x" + (prefix + blake2_128_concat(bytes.fromhex(ss58_decode(address)))).hex()


class Processor:
    def __init__(self, options: ProcessorOptions, db: Writable) -> None:
        self.o = options
        self.db = db
        self.runtimes: dict[int, Runtime] = {}
        self.spec_name: str | None = None
        self._loading: dict[int, asyncio.Future[Runtime]] = {}
        self.runtime_genesis: str | None = None
        # Decoded metadata by (spec version, digest of the metadata), across genesis changes:
        # a reset that keeps the runtime (only the genesis state changed) reuses its decoders
        # instead of decoding the metadata again (most of a reset's catch-up time).
        self._decoded: dict[tuple[int, str], Runtime] = {}
        self.stopping = asyncio.Event()
        self.synced = asyncio.Event()  # set after each completed sync (tests, benchmarks)
        self.blocks_written = 0
        self.settled_forks = 0  # finalized blocks found replaced (SettledFork), since start
        self.last_step: StepReport | None = None
        self.link_lost: LinkLost | None = LinkLost(time.monotonic(), "not connected yet")

    # -- database ---------------------------------------------------------------------------

    def _tx(self, fn: Callable[[Connection], T]) -> T:
        with self.db.session(write=True) as session:
            return fn(session.connection())

    async def _db(self, fn: Callable[[Connection], T]) -> T:
        return await asyncio.to_thread(self._tx, fn)

    # -- main loop --------------------------------------------------------------------------

    def stop(self) -> None:
        self.stopping.set()

    async def run(self) -> None:
        """Until stopped: connect, sync, follow; on any connection loss start over (a reset
        restarts the nodes, so a lost connection is the normal sign of one)."""
        delay = self.o.retry_min_s
        while not self.stopping.is_set():
            reason = "the connection ended"
            try:
                async with RpcClient(self.o.rpc_url) as rpc:
                    await self._follow(rpc)
            except (RpcError, OSError, ChainMoved) as exc:
                reason = str(exc) or type(exc).__name__
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                reason = f"unexpected error: {exc!r}"
                log.exception("indexer: unexpected error; reconnecting")
            if self.stopping.is_set():
                break
            lost = self.link_lost
            if lost is None or lost.reason != reason:  # once per outage and reason, not per try
                log.warning("indexer: %s; reconnecting", reason)
            if lost is None:
                delay = self.o.retry_min_s
            self.link_lost = LinkLost(lost.at if lost else time.monotonic(), reason)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), delay)
            delay = min(delay * 2, self.o.retry_max_s)

    async def _follow(self, rpc: RpcClient) -> None:
        heads = await rpc.subscribe("chain_subscribeNewHeads")
        if self.link_lost is not None:
            log.info("indexer: connected to %s (%.1f s after: %s)", self.o.rpc_url,
                     time.monotonic() - self.link_lost.at, self.link_lost.reason)
            self.link_lost = None
        stop = asyncio.create_task(self.stopping.wait())
        try:
            while not self.stopping.is_set():
                try:
                    await self.sync(rpc)
                except ChainMoved as exc:
                    log.info("indexer: chain moved during a batch (%s); reconciling", exc)
                    continue
                get = asyncio.create_task(heads.get())
                done, _ = await asyncio.wait({get, stop}, timeout=self.o.poll_interval_s,
                                             return_when=asyncio.FIRST_COMPLETED)
                if get not in done:
                    get.cancel()
                    continue
                item = get.result()
                if isinstance(item, Exception):
                    raise item
                while not heads.empty():  # coalesce heads that arrived meanwhile
                    if isinstance(heads.get_nowait(), Exception):
                        raise RpcError("subscription ended")
        finally:
            stop.cancel()

    # -- one step ---------------------------------------------------------------------------

    async def sync(self, rpc: RpcClient) -> None:
        genesis, chain_name, best_header, fin_hash = await rpc.batch([
            ("chain_getBlockHash", [0]), ("system_chain", []), ("chain_getHeader", []),
            ("chain_getFinalizedHead", []),
        ], self.o.head_timeout_s)
        net = await self._db(lambda c: store.ensure_network(c, genesis, chain_name))
        if net.archived:
            self.last_step = None  # its figures are of the archived network
            log.warning("indexer: the chain's genesis changed from %s to %s (a reset): the old "
                        "network is archived with its rows, reset count %d; indexing %s (%s) "
                        "from its genesis", net.archived, genesis, net.reset_count, genesis,
                        chain_name)
        elif net.created:
            log.info("indexer: indexing network %s (%s), reset count %d", genesis, chain_name,
                     net.reset_count)
        if self.runtime_genesis != genesis:
            # Another chain may reuse a spec version with other types: spec versions are looked
            # up again (the metadata digest decides whether decoded metadata can be reused).
            self.runtimes.clear()
            self._loading.clear()
            self.runtime_genesis = genesis
        fin_number = int((await rpc.call("chain_getHeader", [fin_hash],
                                          self.o.head_timeout_s))["number"], 16)
        best = int(best_header["number"], 16)
        await self.reconcile(rpc, net.id)
        height = await self.catch_up(rpc, net.id, best)
        finalized = min(fin_number, height)
        fin_stored = await self._db(lambda c: store.block_hash(c, net.id, finalized))
        await self._db(lambda c: store.set_status(
            c, net.id, chain_height=best, chain_finalized_height=fin_number,
            finalized_height=finalized if fin_stored else -1, finalized_hash=fin_stored))
        self.last_step = StepReport(time.monotonic(), genesis, net.reset_count, height, best,
                                    finalized if fin_stored else -1)
        self.synced.set()

    async def reconcile(self, rpc: RpcClient, net: int) -> None:
        """Rolls back stored blocks that left the node's best chain."""
        top = await self._db(lambda c: store.tip(c, net))
        if top is None:
            return
        number, stored_hash = top
        if await rpc.call("chain_getBlockHash", [number]) == stored_hash:
            return
        size = 64
        while True:
            numbers = list(rollback_window(number, 0, size))
            chain = dict(zip(numbers, await rpc.batch(
                [("chain_getBlockHash", [n]) for n in numbers]), strict=True))
            low, high = numbers[-1], numbers[0]
            stored = await self._db(lambda c, lo=low, hi=high: store.stored_hashes(c, net, lo, hi))
            ancestor = common_ancestor(stored, chain)
            if ancestor is not None:
                break
            if low == 0:
                raise ChainMoved("no common block with the node's chain; the genesis changed")
            size *= 4
        ancestor_hash = chain[ancestor]
        assert ancestor_hash is not None
        fin_height, fin_hash = await self._db(lambda c: store.finalized(c, net))
        settled = False
        fin_now = None
        if fin_height > ancestor:
            fin_now = chain.get(fin_height) or await rpc.call("chain_getBlockHash", [fin_height])
        try:
            check_settled(ancestor, fin_height, fin_hash, fin_now)
        except SettledFork as exc:
            # What the chain serves is what is true: the index follows it (keeping the old
            # rows would serve a history no node has) but says loudly that this is no fork.
            settled = True
            self.settled_forks += 1
            log.error("indexer: finality violated: %s; following the node's chain", exc)
        accounts, operators = await self._db(lambda c: store.touched_above(c, net, ancestor))
        snap_accounts, snap_operators = await self._snapshots(rpc, ancestor_hash, accounts,
                                                              operators)

        def write(c: Connection) -> int:
            removed = store.rollback(c, net, ancestor)
            store.put_accounts(c, net, ancestor, snap_accounts)
            store.put_operators(c, net, ancestor, snap_operators)
            # After a settled fork the step's end records the chain's finalized block again.
            store.set_status(c, net, height=ancestor, hash=ancestor_hash,
                             **({"finalized_height": -1, "finalized_hash": None}
                                if settled else {}))
            return removed

        removed = await self._db(write)
        log.warning("indexer: fork: rolled back %d block(s) above #%d (%s)", removed, ancestor,
                    ancestor_hash)

    async def catch_up(self, rpc: RpcClient, net: int, best: int) -> int:
        top = await self._db(lambda c: store.tip(c, net))
        start = top[0] + 1 if top else 0
        prev_hash = top[1] if top else None
        if start > best:
            return top[0] if top else -1
        ranges = [(lo, min(lo + self.o.batch_size - 1, best))
                  for lo in range(start, best + 1, self.o.batch_size)]
        pending: list[asyncio.Task[list[RawBlock]]] = []
        # Decoded blocks are written (in a thread) while the next batches are fetched and
        # decoded; writes stay in order because each waits for the one before. Far behind, one
        # write takes several batches: fewer commits, and one balance snapshot (a storage query
        # to the node) for all of them instead of one per batch.
        writing: asyncio.Task[None] | None = None
        decoded: list[Block] = []
        group = self.o.batch_size * self.o.write_batches
        height = start - 1
        # fetch_ahead batches in flight at every moment, whatever the decoding and writing do
        # meanwhile: a finished fetch lets the next queued one go at once (the node is the
        # slowest part; it must never wait for us), up to FETCH_QUEUED batches not yet used.
        in_flight = asyncio.Semaphore(self.o.fetch_ahead)

        async def fetch(low: int, high: int) -> list[RawBlock]:
            async with in_flight:
                return await self._fetch(rpc, low, high)

        try:
            it = iter(ranges)
            for rng in _take(it, self.o.fetch_ahead * FETCH_QUEUED):
                pending.append(asyncio.create_task(fetch(*rng)))
            while pending:
                raws = await pending.pop(0)
                for rng in _take(it, 1):
                    pending.append(asyncio.create_task(fetch(*rng)))
                check_links(prev_hash, raws)
                decoded += [decode_block(r, self.runtimes[r.spec_version]) for r in raws]
                prev_hash, height = decoded[-1].hash, decoded[-1].number
                if pending and len(decoded) < group:
                    continue
                # While the previous write runs, go on fetching and decoding rather than wait
                # for it (waiting left the node without requests); up to a bound of memory.
                busy = writing is not None and not writing.done()
                if busy and pending and len(decoded) < WRITE_BACKLOG * group:
                    continue
                if writing is not None:
                    await writing
                writing = asyncio.create_task(self._store_batch(rpc, net, decoded))
                decoded = []
            if writing is not None:
                await writing
        finally:
            for task in [*pending, *([writing] if writing else [])]:
                if not task.done():
                    task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        return height

    async def _store_batch(self, rpc: RpcClient, net: int, blocks: list[Block]) -> None:
        last = blocks[-1]
        accounts: set[str] = set()
        operators: set[str] = set()
        for b in blocks:
            accounts |= b.touched_accounts()
            operators |= b.touched_operators()
        if blocks[0].number == 0:
            accounts |= await self._all_keys(rpc, ACCOUNT_PREFIX, blocks[0].hash)
            operators |= await self._all_keys(rpc, OPERATOR_PREFIX, blocks[0].hash)
        snap_accounts, snap_operators = await self._snapshots(rpc, last.hash, accounts, operators,
                                                              last.spec_version)

        def write(c: Connection) -> None:
            store.insert_blocks(c, net, blocks)
            store.put_accounts(c, net, last.number, snap_accounts)
            store.put_operators(c, net, last.number, snap_operators)
            store.set_status(c, net, height=last.number, hash=last.hash,
                             spec_version=last.spec_version, spec_name=self.spec_name)

        await self._db(write)
        self.blocks_written += len(blocks)

    # -- fetching ---------------------------------------------------------------------------

    async def _fetch(self, rpc: RpcClient, low: int, high: int) -> list[RawBlock]:
        numbers = range(low, high + 1)
        hashes = await rpc.batch([("chain_getBlockHash", [n]) for n in numbers])
        if any(h is None for h in hashes):
            raise ChainMoved(f"the node's best chain no longer reaches #{high}")
        calls: list[tuple[str, list[Any]]] = []
        for h in hashes:
            calls += [("chain_getBlock", [h]), ("state_getStorage", [EVENTS_KEY, h]),
                      ("state_getStorage", [TIMESTAMP_KEY, h])]
        calls += [("state_getRuntimeVersion", [hashes[0]]),
                  ("state_getRuntimeVersion", [hashes[-1]])]
        answers = await rpc.batch(calls)
        first_v, last_v = answers[-2]["specVersion"], answers[-1]["specVersion"]
        # The node's word, bounded to the column: shown by _metadata, never interpreted.
        self.spec_name = str(answers[-1].get("specName") or "")[:100] or None
        if first_v == last_v:
            versions = [first_v] * len(hashes)
        else:  # a runtime upgrade inside this batch: ask for each block
            versions = [v["specVersion"] for v in await rpc.batch(
                [("state_getRuntimeVersion", [h]) for h in hashes])]
        for version in dict.fromkeys(versions):
            await self._runtime(rpc, version, hashes[versions.index(version)])
        out = []
        for i, (n, h) in enumerate(zip(numbers, hashes, strict=True)):
            signed, events, stamp = answers[3 * i:3 * i + 3]
            if signed is None:
                raise ChainMoved(f"block {h} (#{n}) is gone from the node")
            block = signed["block"]
            out.append(RawBlock(number=n, hash=h, parent_hash=block["header"]["parentHash"],
                                extrinsics=block["extrinsics"], events=events,
                                spec_version=versions[i], timestamp=_u64(stamp)))
        return out

    async def _runtime(self, rpc: RpcClient, version: int, at: str) -> Runtime:
        """The decoders of ``version``, built once even when batches fetched side by side all
        meet a new version (decoding the metadata takes a second or more)."""
        if version in self.runtimes:
            return self.runtimes[version]
        if version not in self._loading:
            async def load() -> Runtime:
                metadata = await rpc.call("state_getMetadata", [at])
                key = (version, hashlib.blake2b(metadata.encode(), digest_size=16).hexdigest())
                runtime = self._decoded.get(key)
                if runtime is None:
                    runtime = await asyncio.to_thread(Runtime, version, metadata,
                                                      self.o.ss58_format)
                    while len(self._decoded) >= DECODED_KEPT:
                        self._decoded.pop(next(iter(self._decoded)))
                    self._decoded[key] = runtime
                self.runtimes[version] = runtime
                return runtime
            self._loading[version] = asyncio.ensure_future(load())
        try:
            return await asyncio.shield(self._loading[version])
        finally:
            if self._loading.get(version) is not None and self._loading[version].done():
                self._loading.pop(version, None)

    async def _all_keys(self, rpc: RpcClient, prefix: bytes, at: str) -> set[str]:
        prefix_hex = "0x" + prefix.hex()
        found: set[str] = set()
        start: str | None = None
        while True:
            keys = await rpc.call("state_getKeysPaged", [prefix_hex, KEYS_PAGE, start, at])
            for key in keys:
                found.add(ss58_encode(key[-64:], self.o.ss58_format))
            if len(keys) < KEYS_PAGE:
                return found
            start = keys[-1]

    async def _snapshots(self, rpc: RpcClient, at: str, accounts: set[str],
                         operators: set[str], version: int | None = None,
                         ) -> tuple[dict[str, Any], dict[str, Any]]:
        if not accounts and not operators:
            return {}, {}
        if version is None:
            version = (await rpc.call("state_getRuntimeVersion", [at]))["specVersion"]
        runtime = await self._runtime(rpc, version, at)
        acc_keys = {_storage_key(ACCOUNT_PREFIX, a): a for a in sorted(accounts)}
        op_keys = {_storage_key(OPERATOR_PREFIX, a): a for a in sorted(operators)}
        values: dict[str, str | None] = {}
        all_keys = list(acc_keys) + list(op_keys)
        for chunk in _chunks(all_keys, 500):
            for change_set in await rpc.call("state_queryStorageAt", [chunk, at]):
                for key, value in change_set["changes"]:
                    values[key] = value
        acc_type = runtime.storage_value_type("System", "Account")
        op_type = runtime.storage_value_type("OperatorStake", "Operators")
        snap_accounts = {a: (runtime.decode_value(acc_type, values[k]) if values.get(k) else None)
                         for k, a in acc_keys.items()}
        snap_operators = {a: (runtime.decode_value(op_type, values[k]) if values.get(k) else None)
                          for k, a in op_keys.items()}
        return snap_accounts, snap_operators


def _u64(value: str | None) -> int | None:
    """A SCALE u64 storage value (hex), None when absent or not one (the node's word)."""
    if not isinstance(value, str) or len(value) != 18 or not value.startswith("0x"):
        return None
    try:
        return int.from_bytes(bytes.fromhex(value[2:]), "little")
    except ValueError:
        return None


def _take(it: Iterator[T], n: int) -> list[T]:
    out = []
    for _ in range(n):
        try:
            out.append(next(it))
        except StopIteration:
            break
    return out


def _chunks(items: list[T], size: int) -> Iterator[list[T]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]

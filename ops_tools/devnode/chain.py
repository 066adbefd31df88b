"""The chain: block import (shared by local authoring and the network), heads, fork choice.

Import checks what a Substrate node's import queue checks for Aura: a known parent, the next
number, a slot above the parent's, the slot's author from the parent state's authority set, the
author's seal, and the state and extrinsics roots by re-executing the block.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ops_tools.chainspec.header import (
    DIGEST_PRE_RUNTIME,
    DIGEST_SEAL,
    ZERO_HASH,
    DigestItem,
    Header,
)
from ops_tools.chainspec.scale import Reader, encode_compact
from ops_tools.chainspec.trie import EMPTY_TRIE_ROOT
from ops_tools.devnode.chain_spec import ChainSpec
from ops_tools.devnode.crypto import verify
from ops_tools.devnode.runtime.executive import BlockResult, RuntimeInfo, execute_block
from ops_tools.devnode.runtime.extrinsic import InvalidTransaction, decode_extrinsic
from ops_tools.devnode.runtime.metadata import encode_metadata
from ops_tools.devnode.runtime.state import ChainConfig, State, read_config
from ops_tools.devnode.storage import Database
from ops_tools.errors import OpsError

log = logging.getLogger("devnode")
AURA = b"aura"
MAX_FUTURE_SLOTS = 2


class ImportError_(Exception):
    """A block that cannot be imported; ``unknown_parent`` asks the caller to sync first."""

    def __init__(self, message: str, unknown_parent: bool = False) -> None:
        super().__init__(message)
        self.unknown_parent = unknown_parent


def short(h: bytes) -> str:
    return f"0x{h[:2].hex()}…{h[-2:].hex()}"


def slot_of(header: Header) -> int:
    for item in header.digest:
        if item.kind == DIGEST_PRE_RUNTIME and item.engine == AURA:
            return int.from_bytes(item.data[:8], "little")
    return 0


def encode_body(extrinsics: list[bytes]) -> bytes:
    return encode_compact(len(extrinsics)) + b"".join(extrinsics)


def decode_body(body: bytes) -> list[bytes]:
    r = Reader(body, "block body")
    out = []
    for _ in range(r.compact("extrinsic count")):
        start = r.pos
        n = r.compact("extrinsic length")
        r.fixed(n, "extrinsic")
        out.append(body[start : r.pos])
    return out


@dataclass(frozen=True)
class Head:
    hash: bytes
    number: int
    header: Header


class Chain:
    def __init__(self, spec: ChainSpec, db: Database) -> None:
        self.spec, self.db = spec, db
        self.genesis_hash = spec.genesis.genesis_hash
        rt = spec.runtime
        self.info = RuntimeInfo(
            self.genesis_hash, rt.spec_version, rt.transaction_version, rt.state_version
        )
        genesis_state = State(spec.storage)
        self.config: ChainConfig = read_config(genesis_state)
        self._states: OrderedDict[bytes, State] = OrderedDict()
        self._headers: OrderedDict[bytes, Header] = OrderedDict()
        self._metadata: dict[int, bytes] = {}
        self.import_listeners: list[Callable[[Head, bool, str], None]] = []
        self.finality_listeners: list[Callable[[Head], None]] = []
        stored = db.meta("genesis")
        if stored is None:
            header = Header(ZERO_HASH, 0, spec.genesis.state_root, EMPTY_TRIE_ROOT)
            db.insert_block(
                self.genesis_hash,
                0,
                ZERO_HASH,
                header.encode(),
                encode_body([]),
                spec.storage,
                {0: self.genesis_hash},
                None,
                {
                    "genesis": self.genesis_hash,
                    "best": self.genesis_hash,
                    "finalized": self.genesis_hash,
                },
            )
        elif stored != self.genesis_hash:
            raise OpsError(
                f"the database holds the chain of genesis 0x{stored.hex()},"
                f" but the chain spec's genesis is"
                f" 0x{self.genesis_hash.hex()}; run 'devnode purge-chain' for this chain first"
            )
        best = db.meta("best") or self.genesis_hash
        fin = db.meta("finalized") or self.genesis_hash
        self.best = self._head(best)
        self.finalized = self._head(fin)

    # ---- reads -----------------------------------------------------------------------------------
    def _head(self, hash_: bytes) -> Head:
        header = self.header(hash_)
        if header is None:
            raise OpsError(f"the database is missing block 0x{hash_.hex()}; purge the chain")
        return Head(hash_, header.number, header)

    def header(self, hash_: bytes) -> Header | None:
        cached = self._headers.get(hash_)
        if cached is not None:
            return cached
        row = self.db.block(hash_)
        if row is None:
            return None
        header = Header.decode(row[2])
        self._headers[hash_] = header
        if len(self._headers) > 4096:
            self._headers.popitem(last=False)
        return header

    def body(self, hash_: bytes) -> list[bytes] | None:
        row = self.db.block(hash_)
        return decode_body(row[3]) if row else None

    def justification(self, hash_: bytes) -> bytes | None:
        row = self.db.block(hash_)
        return row[4] if row else None

    def state(self, hash_: bytes) -> State | None:
        cached = self._states.get(hash_)
        if cached is not None:
            self._states.move_to_end(hash_)
            return cached
        data = self.db.state(hash_)
        if data is None:
            return None
        state = State(data)
        self._cache_state(hash_, state)
        return state

    def _cache_state(self, hash_: bytes, state: State) -> None:
        self._states[hash_] = state
        if len(self._states) > 64:
            self._states.popitem(last=False)

    def canon_hash(self, number: int) -> bytes | None:
        if number > self.best.number:
            return None
        return self.db.canon_hash(number)

    def ancestor_at(self, hash_: bytes, number: int) -> bytes | None:
        header = self.header(hash_)
        while header is not None and header.number > number:
            hash_ = header.parent_hash
            header = self.header(hash_)
        return hash_ if header is not None and header.number == number else None

    def metadata(self, version: int = 14) -> bytes:
        if version not in self._metadata:
            self._metadata[version] = encode_metadata(self.config.as_constants(), version)
        return self._metadata[version]

    def authorities_at(self, parent: bytes) -> tuple[bytes, ...]:
        """The aura set for a child of ``parent``: the genesis set (no call of this runtime
        changes it; a runtime with session rotation would read it from ``parent``'s state)."""
        return self.config.aura_authorities

    # ---- import ----------------------------------------------------------------------------------
    def import_block(
        self,
        header: Header,
        extrinsics: list[bytes],
        origin: str,
        result: BlockResult | None = None,
    ) -> bool:
        """Import a block; returns whether it is new. ``result`` skips re-execution (own blocks)."""
        hash_ = header.hash()
        if self.db.has_block(hash_):
            return False
        parent_header = self.header(header.parent_hash)
        if parent_header is None:
            raise ImportError_(
                f"unknown parent {short(header.parent_hash)} of #{header.number}", True
            )
        if header.number != parent_header.number + 1:
            raise ImportError_(
                f"#{header.number} does not follow its parent #{parent_header.number}"
            )
        if header.parent_hash != self.db.canon_hash(parent_header.number) and (
            self.ancestor_at(header.parent_hash, self.finalized.number) != self.finalized.hash
        ):
            raise ImportError_(
                f"#{header.number} is on a fork below the finalized #{self.finalized.number}"
            )
        slot = self._check_seal(header, parent_header)
        if result is None:
            parent_state = self.state(header.parent_hash)
            if parent_state is None:
                raise ImportError_(f"no state for parent {short(header.parent_hash)}")
            try:
                xts = [decode_extrinsic(x) for x in extrinsics]
                result = execute_block(
                    parent_state,
                    number=header.number,
                    parent_hash=header.parent_hash,
                    slot=slot,
                    info=self.info,
                    config=self.config,
                    extrinsics=xts,
                    skip_invalid=False,
                    block_hash_at=lambda n: self.ancestor_at(header.parent_hash, n),
                )
            except InvalidTransaction as exc:
                raise ImportError_(
                    f"#{header.number} holds an invalid extrinsic: {exc.reason}"
                ) from None
            if result.state_root != header.state_root:
                raise ImportError_(
                    f"#{header.number}: state root mismatch (block {short(header.state_root)},"
                    f" executed {short(result.state_root)})"
                )
            if result.extrinsics_root != header.extrinsics_root:
                raise ImportError_(f"#{header.number}: extrinsics root mismatch")
        is_best = header.number > self.best.number
        canon: dict[int, bytes] = {}
        truncate = None
        if is_best:
            canon[header.number] = hash_
            # Re-point the canonical index along the new best's ancestry (a reorg when it differs).
            cursor, n = header.parent_hash, header.number - 1
            while n >= 0 and self.db.canon_hash(n) != cursor:
                canon[n] = cursor
                cursor = self.header(cursor).parent_hash  # type: ignore[union-attr]
                n -= 1
            truncate = header.number
        meta = {"best": hash_} if is_best else {}
        self.db.insert_block(
            hash_,
            header.number,
            header.parent_hash,
            header.encode(),
            encode_body(extrinsics),
            result.state.data,
            canon,
            truncate,
            meta,
        )
        self._headers[hash_] = header
        self._cache_state(hash_, result.state)
        head = Head(hash_, header.number, header)
        if is_best:
            self.best = head
        for listener in list(self.import_listeners):
            listener(head, is_best, origin)
        return True

    def _check_seal(self, header: Header, parent: Header) -> int:
        digest = header.digest
        if not digest or digest[-1].kind != DIGEST_SEAL or digest[-1].engine != AURA:
            raise ImportError_(f"#{header.number} carries no aura seal")
        slot = slot_of(header)
        if slot <= slot_of(parent):
            raise ImportError_(f"#{header.number}: slot {slot} is not after its parent's")
        now_slot = int(time.time() * 1000) // self.config.slot_duration
        if slot > now_slot + MAX_FUTURE_SLOTS:
            raise ImportError_(f"#{header.number}: slot {slot} is in the future (now {now_slot})")
        authorities = self.authorities_at(header.parent_hash)
        if not authorities:
            raise ImportError_("the chain has no aura authorities")
        author = authorities[slot % len(authorities)]
        pre = Header(
            header.parent_hash,
            header.number,
            header.state_root,
            header.extrinsics_root,
            digest[:-1],
        )
        if not verify("Sr25519", digest[-1].data, pre.hash(), author):
            raise ImportError_(f"#{header.number}: bad seal (not signed by the slot's author)")
        return slot

    def set_finalized(self, hash_: bytes, justification: bytes | None) -> None:
        head = self._head(hash_)
        if head.number <= self.finalized.number:
            return
        self.db.set_meta({"finalized": hash_}, (hash_, justification) if justification else None)
        self.finalized = head
        for listener in list(self.finality_listeners):
            listener(head)


def seal_digest(slot: int) -> DigestItem:
    return DigestItem(DIGEST_PRE_RUNTIME, AURA, slot.to_bytes(8, "little"))


def header_json(header: Header) -> dict[str, Any]:
    return {
        "parentHash": "0x" + header.parent_hash.hex(),
        "number": hex(header.number),
        "stateRoot": "0x" + header.state_root.hex(),
        "extrinsicsRoot": "0x" + header.extrinsics_root.hex(),
        "digest": {"logs": ["0x" + d.encode().hex() for d in header.digest]},
    }

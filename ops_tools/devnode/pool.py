"""The transaction pool: validated on submission, ordered by sender nonce, with watchers.

A nonce below the account's is outdated; one past the sender's queue (account nonce plus the
sender's transactions already in the pool) is refused as "valid in the future", so a client
always learns at submission whether its transaction can be included.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ops_tools.chainspec.hashing import blake2_256
from ops_tools.devnode.chain import Chain, Head
from ops_tools.devnode.runtime import extrinsic as xtmod
from ops_tools.devnode.runtime.executive import validate
from ops_tools.devnode.runtime.extrinsic import Extrinsic, InvalidTransaction, decode_extrinsic

log = logging.getLogger("devnode")
Watcher = Callable[[Any], None]
MAX_POOL = 8192


@dataclass
class Entry:
    xt: Extrinsic
    seq: int
    watchers: list[Watcher] = field(default_factory=list)


class Pool:
    def __init__(self, chain: Chain) -> None:
        self.chain = chain
        self.entries: dict[bytes, Entry] = {}
        self.seq = 0
        # Included transactions still watched until their block is final: hash -> (block, number).
        self.included: dict[bytes, tuple[bytes, int, list[Watcher]]] = {}
        self.gossip: list[Callable[[bytes], None]] = []
        chain.import_listeners.append(self._on_import)
        chain.finality_listeners.append(self._on_finalized)

    def __len__(self) -> int:
        return len(self.entries)

    def submit(
        self, encoded: bytes, watcher: Watcher | None = None, from_peer: bool = False
    ) -> bytes:
        xt = decode_extrinsic(encoded)
        if xt.hash in self.entries or xt.hash in self.included:
            raise InvalidTransaction(
                "Transaction Already Imported", 1013, "Transaction Already Imported"
            )
        if len(self.entries) >= MAX_POOL:
            raise InvalidTransaction("Transaction pool is full", 1016, "Immediately Dropped")
        best = self.chain.best
        state = self.chain.state(best.hash)
        assert state is not None
        nonce = validate(state, xt, self.chain.info, self.chain.canon_hash, best.number + 1)
        queued = {e.xt.nonce for e in self.entries.values() if e.xt.signer == xt.signer}
        if xt.nonce in queued:
            raise InvalidTransaction("Priority is too low: (0 vs 0)", 1014, "Priority is too low")
        expected = nonce
        while expected in queued:
            expected += 1
        if xt.nonce > expected:
            raise InvalidTransaction(xtmod.FUTURE)
        self.seq += 1
        entry = Entry(xt, self.seq, [watcher] if watcher else [])
        self.entries[xt.hash] = entry
        if watcher:
            watcher("ready")
        if not from_peer:
            for send in self.gossip:
                send(encoded)
        return xt.hash

    def next_index(self, who: bytes) -> int:
        state = self.chain.state(self.chain.best.hash)
        assert state is not None
        nonce = state.get("System", "Account", who)["nonce"]
        queued = {e.xt.nonce for e in self.entries.values() if e.xt.signer == who}
        while nonce in queued:
            nonce += 1
        return nonce

    def ready(self, limit: int = 512) -> list[Extrinsic]:
        """Transactions for the next block: each sender's in nonce order, senders by arrival."""
        by_sender: dict[bytes, list[Entry]] = {}
        for e in sorted(self.entries.values(), key=lambda e: e.seq):
            by_sender.setdefault(e.xt.signer, []).append(e)
        out: list[Extrinsic] = []
        for entries in by_sender.values():
            out.extend(e.xt for e in sorted(entries, key=lambda e: e.xt.nonce))
        return out[:limit]

    def drop(self, xt_hash: bytes, reason: str) -> None:
        entry = self.entries.pop(xt_hash, None)
        if entry:
            log.debug("dropping transaction 0x%s: %s", xt_hash.hex(), reason)
            for w in entry.watchers:
                w("invalid")

    def pending(self) -> list[bytes]:
        return [e.xt.encoded for e in sorted(self.entries.values(), key=lambda e: e.seq)]

    def _on_import(self, head: Head, is_best: bool, origin: str) -> None:
        if not is_best:
            return
        body = self.chain.body(head.hash) or []
        for encoded in body:
            h = blake2_256(encoded)
            entry = self.entries.pop(h, None)
            if entry is not None:
                for w in entry.watchers:
                    w({"inBlock": "0x" + head.hash.hex()})
                if entry.watchers:
                    self.included[h] = (head.hash, head.number, entry.watchers)
        self._revalidate()

    def _revalidate(self) -> None:
        best = self.chain.best
        state = self.chain.state(best.hash)
        if state is None:
            return
        for h, entry in list(self.entries.items()):
            try:
                # The signature was checked at submission and cannot have changed.
                validate(
                    state,
                    entry.xt,
                    self.chain.info,
                    self.chain.canon_hash,
                    best.number + 1,
                    check_signature=False,
                )
            except InvalidTransaction as exc:
                self.drop(h, exc.reason)

    def _on_finalized(self, head: Head) -> None:
        for h, (block, number, watchers) in list(self.included.items()):
            if number <= head.number:
                if self.chain.canon_hash(number) == block:
                    for w in watchers:
                        w({"finalized": "0x" + block.hex()})
                else:
                    for w in watchers:
                        w({"retracted": "0x" + block.hex()})
                del self.included[h]

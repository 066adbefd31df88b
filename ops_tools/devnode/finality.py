"""Finality in GRANDPA's spirit: authorities sign votes for their best block with their grandpa
(ed25519) keys; a block is final once more than two thirds of the authority weight has voted
for it or a descendant. The votes that finalised a block are its justification.

Simplified against GRANDPA: one round kind (no prevote/precommit split) and a fixed authority
set (set id 0), which keeps the property the network depends on: no finality without both
foundation authorities.

As with GRANDPA, finality is a step of its own after import: an authority votes for a block
``delay`` seconds after importing it, and an import never finalizes anything by itself (votes
that arrived before their block are counted in that later round). So every chain, a
single-authority one included, reports a block as best (``inBlock``) before it reports it as
final, and clients that act on ``inBlock`` (fetching the block's events) get to finish.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from ops_tools.chainspec.scale import Reader, encode_compact
from ops_tools.devnode.chain import Chain, Head, short
from ops_tools.devnode.crypto import KeyPair, verify
from ops_tools.devnode.keystore import Keystore
from ops_tools.errors import OpsError

log = logging.getLogger("devnode")
ENGINE = b"FRNK"
SET_ID = 0
MAX_DEFAULT_DELAY_MS = 1000


def default_delay_ms(slot_duration_ms: int) -> int:
    """Half a slot, at most a second: well after the import, well before the next block."""
    return max(1, min(MAX_DEFAULT_DELAY_MS, slot_duration_ms // 2))


Later = Callable[[float, Callable[[], None]], object]


@dataclass(frozen=True)
class Vote:
    authority: bytes
    target: bytes
    number: int
    signature: bytes

    def encode(self) -> bytes:
        return self.authority + self.target + self.number.to_bytes(4, "little") + self.signature

    @classmethod
    def decode(cls, r: Reader) -> Vote:
        return cls(r.fixed(32), r.fixed(32), r.u32(), r.fixed(64))


def vote_message(genesis: bytes, target: bytes, number: int) -> bytes:
    return (
        b"devnode/vote"
        + genesis
        + target
        + number.to_bytes(4, "little")
        + SET_ID.to_bytes(8, "little")
    )


def encode_justification(target: bytes, number: int, votes: list[Vote]) -> bytes:
    return (
        target
        + number.to_bytes(4, "little")
        + encode_compact(len(votes))
        + b"".join(v.encode() for v in votes)
    )


def decode_justification(data: bytes) -> tuple[bytes, int, list[Vote]]:
    r = Reader(data, "justification")
    target, number = r.fixed(32), r.u32()
    return target, number, [Vote.decode(r) for _ in range(r.compact())]


class Finality:
    """``later(seconds, fn)`` runs ``fn`` on the node's event loop after ``seconds``; the rounds
    that follow imports are scheduled with it."""

    def __init__(
        self, chain: Chain, keystore: Keystore | None, delay: float, later: Later
    ) -> None:
        if delay <= 0:
            raise ValueError("the finality delay must be positive")
        self.chain = chain
        self.delay, self.later = delay, later
        # Imports waiting for their round: at most the one due next and the latest one after
        # it (a vote for the latest backs every block before it).
        self._due: tuple[float, bytes] | None = None
        self._next: tuple[float, bytes] | None = None
        self.weights = dict(chain.config.grandpa_authorities)
        self.total = sum(self.weights.values())
        self.votes: dict[bytes, Vote] = {}
        self.keystore = keystore
        self._pairs: dict[bytes, KeyPair] = {}
        self.gossip: list[Callable[[Vote], None]] = []
        chain.import_listeners.append(self._on_import)

    def _on_import(self, head: Head, is_best: bool, origin: str) -> None:
        # Even a non-best import gets a round: a vote may have arrived before its block. It
        # never displaces a pending best block's round, though (that one gets the vote).
        entry = (time.monotonic() + self.delay, head.hash)
        if self._due is None:
            self._due = entry
            self.later(self.delay, self._round)
        elif is_best or self._next is None:
            self._next = entry

    def _round(self) -> None:
        """The finality step of the block imported ``delay`` ago: vote for it, then count."""
        assert self._due is not None
        _, target = self._due
        self._due, self._next = self._next, None
        if self._due is not None:
            self.later(max(0.0, self._due[0] - time.monotonic()), self._round)
        header = self.chain.header(target)
        # A block that lost a fork choice meanwhile gets no vote: authorities vote on their best
        # chain (the round of the block that replaced it does).
        if header is not None and self.chain.canon_hash(header.number) == target:
            self.vote_for(target, header.number)
        self.try_finalize()

    def local_pairs(self) -> list[KeyPair]:
        """The set's grandpa keys this node holds (read each time: keys can be inserted)."""
        if self.keystore is None:
            return []
        for public in self.weights:
            if public not in self._pairs and self.keystore.has("gran", public):
                pair = self.keystore.pair("gran", public, "Ed25519")
                if pair is not None:
                    self._pairs[public] = pair
        return list(self._pairs.values())

    def vote_local(self) -> None:
        """Vote for the best block now (a restarted authority, for the head it already has)."""
        self.vote_for(self.chain.best.hash, self.chain.best.number)

    def vote_for(self, target: bytes, number: int) -> None:
        for pair in self.local_pairs():
            sig = pair.sign(vote_message(self.chain.genesis_hash, target, number))
            self.add_vote(Vote(pair.public, target, number, sig), local=True)

    def add_vote(self, vote: Vote, local: bool = False) -> bool:
        """Record a vote; returns whether it was new (and so worth passing on)."""
        if vote.authority not in self.weights:
            return False
        current = self.votes.get(vote.authority)
        if current is not None and current.number >= vote.number:
            return False
        message = vote_message(self.chain.genesis_hash, vote.target, vote.number)
        if not local and not verify("Ed25519", vote.signature, message, vote.authority):
            log.debug("dropping a vote with a bad signature from %s", vote.authority.hex())
            return False
        self.votes[vote.authority] = vote
        for send in self.gossip:
            send(vote)
        self.try_finalize()
        return True

    def try_finalize(self) -> None:
        chain = self.chain
        fin = chain.finalized.number
        # Weight behind each block on the best chain: votes whose target descends from it.
        support: dict[int, int] = {}
        backing: dict[int, list[Vote]] = {}
        for vote in self.votes.values():
            if vote.number <= fin or chain.header(vote.target) is None:
                continue
            top = self._canon_ancestor(vote.target, fin)
            if top is None:
                continue
            support[top] = support.get(top, 0) + self.weights[vote.authority]
            backing.setdefault(top, []).append(vote)
        # A vote for block n also backs every ancestor: accumulate from the top down.
        acc, voters = 0, []
        for number in sorted(support, reverse=True):
            acc += support[number]
            voters += backing[number]
            if 3 * acc > 2 * self.total:
                target = chain.canon_hash(number)
                if target is None:
                    return
                justification = encode_justification(target, number, voters)
                chain.set_finalized(target, justification)
                log.debug("finalized #%d (%s)", number, short(target))
                return

    def _canon_ancestor(self, target: bytes, floor: int) -> int | None:
        """Number of the highest block on the best chain that ``target`` is or descends from."""
        chain = self.chain
        header = chain.header(target)
        h = target
        while header is not None and header.number > floor:
            if header.number <= chain.best.number and chain.canon_hash(header.number) == h:
                return header.number
            h = header.parent_hash
            header = chain.header(h)
        return None

    def import_justification(self, block: bytes, data: bytes) -> bool:
        """Finalize ``block`` on a justification received with it (sync), if it holds up."""
        chain = self.chain
        header = chain.header(block)
        if header is None or header.number <= chain.finalized.number:
            return False
        try:
            target, number, votes = decode_justification(data)
        except (OpsError, ValueError):
            return False
        if target != block or number != header.number:
            return False
        weight, seen = 0, set()
        for vote in votes:
            if vote.authority in seen or vote.authority not in self.weights or vote.number < number:
                continue
            message = vote_message(chain.genesis_hash, vote.target, vote.number)
            if not verify("Ed25519", vote.signature, message, vote.authority):
                continue
            if vote.target != block and chain.ancestor_at(vote.target, number) != block:
                continue
            seen.add(vote.authority)
            weight += self.weights[vote.authority]
        if 3 * weight <= 2 * self.total or chain.canon_hash(number) != block:
            return False
        chain.set_finalized(block, data)
        return True

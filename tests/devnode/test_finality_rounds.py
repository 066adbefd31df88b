"""Finality rounds in-process: an import schedules a round; only the round votes and finalizes.

A real chain (built-in ``dev``, one authority //Alice) in a temporary database, blocks authored
through the node's own path; the event loop's ``call_later`` is replaced by a list of pending
rounds so that each step is explicit.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ops_tools.devnode.authoring import Author
from ops_tools.devnode.chain import Chain, slot_of
from ops_tools.devnode.chain_spec import load_chain
from ops_tools.devnode.finality import Finality, default_delay_ms
from ops_tools.devnode.keystore import Keystore
from ops_tools.devnode.pool import Pool
from ops_tools.devnode.storage import Database


class Rounds:
    def __init__(self) -> None:
        self.pending: list[tuple[float, Callable[[], None]]] = []

    def later(self, seconds: float, fn: Callable[[], None]) -> None:
        self.pending.append((seconds, fn))

    def run_next(self) -> None:
        _, fn = self.pending.pop(0)
        fn()


@pytest.fixture
def dev_chain(tmp_path: Path):
    chain = Chain(load_chain("dev"), Database(tmp_path / "db"))
    keystore = Keystore(tmp_path / "keystore")
    keystore.insert("aura", "//Alice", "Sr25519")
    keystore.insert("gran", "//Alice", "Ed25519")
    rounds = Rounds()
    finality = Finality(chain, keystore, 0.5, rounds.later)
    author = Author(chain, Pool(chain), keystore, lambda: False)

    def author_next() -> None:
        author.author_slot(slot_of(chain.best.header) + 1 if chain.best.number else 1)

    yield chain, finality, rounds, author_next
    chain.db.close()


def test_an_import_schedules_a_round_and_finalizes_nothing_itself(dev_chain):
    chain, _, rounds, author_next = dev_chain
    author_next()
    assert chain.best.number == 1
    assert chain.finalized.number == 0  # the import alone: not final
    assert [delay for delay, _ in rounds.pending] == [0.5]
    rounds.run_next()
    assert chain.finalized.number == 1
    assert chain.justification(chain.best.hash) is not None


def test_imports_before_a_round_share_it_and_the_latest_gets_the_next(dev_chain):
    chain, finality, rounds, author_next = dev_chain
    for _ in range(3):
        author_next()
    assert chain.best.number == 3 and chain.finalized.number == 0
    assert len(rounds.pending) == 1  # one round due, the latest import queued behind it
    rounds.run_next()
    assert chain.finalized.number == 1  # the round of #1 votes for #1
    assert len(rounds.pending) == 1
    rounds.run_next()
    assert chain.finalized.number == 3  # #2's round was skipped: the vote for #3 backs it
    assert [v.number for v in finality.votes.values()] == [3]
    assert rounds.pending == []


def test_a_non_authority_votes_nothing(tmp_path: Path):
    chain = Chain(load_chain("dev"), Database(tmp_path / "db"))
    rounds = Rounds()
    finality = Finality(chain, None, 0.5, rounds.later)
    assert finality.local_pairs() == []
    finality.vote_local()
    assert finality.votes == {} and chain.finalized.number == 0
    chain.db.close()


def test_default_delay_is_half_a_slot_at_most_a_second():
    assert default_delay_ms(6000) == 1000
    assert default_delay_ms(1000) == 500
    assert default_delay_ms(10) == 5
    assert default_delay_ms(1) == 1


def test_finality_delay_must_be_positive(tmp_path: Path):
    chain = Chain(load_chain("dev"), Database(tmp_path / "db"))
    with pytest.raises(ValueError, match="positive"):
        Finality(chain, None, 0, Rounds().later)
    chain.db.close()

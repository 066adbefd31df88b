"""Fork handling as pure decisions: where the stored chain and the node's chain agree, and
whether a fetched batch extends what is stored."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ops_tools.services.indexer.model import RawBlock


class ChainMoved(Exception):
    """The node's best chain changed while a batch was fetched; reconcile and fetch again."""


class SettledFork(Exception):
    """A block the index recorded as finalized is no longer on the node's chain: finality was
    violated, or the node was started again on the same genesis with a new history (a reset
    that kept the chain spec). Never a normal fork: those stay above the finalized height."""


def common_ancestor(stored: Mapping[int, str], chain: Mapping[int, str | None]) -> int | None:
    """The highest number whose stored hash is the chain's hash at that number, among the
    numbers both sides were asked about; None when they disagree on every one of them."""
    for number in sorted(stored, reverse=True):
        if chain.get(number) is not None and chain.get(number) == stored[number]:
            return number
    return None


def check_settled(ancestor: int, finalized: int, finalized_hash: str | None,
                  chain_hash: str | None) -> None:
    """Raises SettledFork when rolling back to ``ancestor`` removes a block recorded as
    finalized (``finalized``, whose hash on the node's chain is now ``chain_hash``)."""
    if finalized > ancestor:
        raise SettledFork(f"block #{finalized} {finalized_hash}, recorded as finalized, is no "
                          f"longer on the node's chain (#{finalized} is {chain_hash} there); "
                          f"the common ancestor is #{ancestor}")


def rollback_window(tip: int, finalized: int, size: int) -> range:
    """Numbers to compare, newest first, never below the finalized height (settled blocks do
    not move)."""
    low = max(finalized, tip - size + 1, 0)
    return range(tip, low - 1, -1)


def check_links(tip_hash: str | None, blocks: Sequence[RawBlock]) -> None:
    """Each block's parent is the previous one, and the first one's parent the stored tip."""
    parent = tip_hash
    for block in blocks:
        if parent is not None and block.parent_hash != parent:
            raise ChainMoved(f"block #{block.number} {block.hash} has parent {block.parent_hash}, "
                             f"expected {parent}")
        parent = block.hash

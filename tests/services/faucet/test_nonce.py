"""The nonce manager: the chain's nonce first, consecutive after it, the chain again after a
failure."""

from __future__ import annotations

from ops_tools.services.faucet.nonce import NonceManager


def test_reads_the_chain_once_then_counts_up() -> None:
    reads: list[int] = []

    def chain() -> int:
        reads.append(7)
        return 7

    nonces = NonceManager(chain)
    assert [nonces.take() for _ in range(4)] == [7, 8, 9, 10]
    assert reads == [7]
    assert nonces.cached == 11


def test_invalidate_rereads_the_chain() -> None:
    answers = iter([3, 12])
    nonces = NonceManager(lambda: next(answers))
    assert nonces.take() == 3
    nonces.invalidate()
    assert nonces.cached is None
    assert nonces.take() == 12

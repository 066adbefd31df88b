"""Nonces of the faucet's one signing account.

The chain is the truth: the first nonce, and the one after any failed submission, is read from
the node (``system_accountNextIndex``, which counts the signer's transactions already in the
pool). In between, the manager hands out consecutive numbers so that concurrent drips never
share a nonce. The caller serialises ``take`` with the submission (the signer's lock), because a
node refuses a nonce past the first gap.
"""

from __future__ import annotations

from collections.abc import Callable


class NonceManager:
    def __init__(self, read_chain_nonce: Callable[[], int]) -> None:
        self._read = read_chain_nonce
        self._next: int | None = None

    def take(self) -> int:
        if self._next is None:
            self._next = self._read()
        nonce = self._next
        self._next += 1
        return nonce

    def invalidate(self) -> None:
        """After a failed submission: the next ``take`` re-reads the chain."""
        self._next = None

    @property
    def cached(self) -> int | None:
        return self._next

"""Readiness: what ``/ready`` checks. A service is ready when its database answers, the chain
answers, and the chain is the network the service was started for (its genesis hash)."""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ops_tools.chain.rpc import RpcClient, RpcError
from ops_tools.services.common.db import Database


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    detail: str = ""


@dataclass(frozen=True)
class ReadyCheck:
    """``probe`` may be a plain function (run in a worker thread) or a coroutine function."""

    name: str
    probe: Callable[[], CheckResult] | Callable[[], Awaitable[CheckResult]]


def database_check(db: Database) -> ReadyCheck:
    def probe() -> CheckResult:
        try:
            db.ping()
        except Exception as exc:  # any driver error means "not ready", with its class named
            return CheckResult(False, f"the database does not answer ({type(exc).__name__})")
        return CheckResult(True, db.dialect)

    return ReadyCheck("database", probe)


class ChainWatch:
    """The chain a service serves: its RPC endpoint and the genesis hash the service was
    started for (configured, or the chain's own at the first answer when none is configured).
    A different genesis later means the network was reset under the service."""

    CACHE_S = 2.0

    def __init__(self, rpc_url: str, expected_genesis: str | None = None,
                 timeout_s: float = 3.0) -> None:
        self.rpc = RpcClient(rpc_url, timeout=timeout_s)
        self.rpc_url = rpc_url
        self.expected = expected_genesis
        self._lock = threading.Lock()
        self._seen: tuple[float, str] | None = None

    def current_genesis(self, *, fresh: bool = False) -> str:
        """The genesis the chain serves now (cached for a moment: /ready may be polled often)."""
        now = time.monotonic()
        with self._lock:
            if not fresh and self._seen and now - self._seen[0] < self.CACHE_S:
                return self._seen[1]
        genesis = self.rpc.genesis_hash().lower()
        with self._lock:
            if self.expected is None:
                self.expected = genesis
            # Only the expected answer is kept: a service waiting for its network (a reset in
            # progress) turns ready at the first poll that sees it, not a cache period later.
            self._seen = (now, genesis) if genesis == self.expected else None
        return genesis

    def check(self) -> CheckResult:
        try:
            genesis = self.current_genesis()
        except RpcError as exc:
            return CheckResult(False, f"the chain does not answer: {exc}")
        if genesis != self.expected:
            return CheckResult(
                False,
                f"the chain at {self.rpc_url} serves genesis {genesis}, but this service was"
                f" started for {self.expected}; restart it on the new network",
            )
        return CheckResult(True, genesis)

    def ready_check(self) -> ReadyCheck:
        return ReadyCheck("chain", self.check)

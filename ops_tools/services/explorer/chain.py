"""The on-chain anchor of a report: which registered operators carry its hash, read from
``OperatorStake::Operators`` with substrate-interface."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from substrateinterface import SubstrateInterface

from ops_tools.chain import substrate as chain_substrate
from ops_tools.chain.urls import http_url

PALLET = "OperatorStake"
PLANCKS_PER_TOKEN = 10**12


class ChainUnavailable(Exception):
    pass


@dataclass(frozen=True)
class Registration:
    account: str
    stake: int
    attestation_hash: str
    last_heartbeat_epoch: int
    registered_at: int | None

    @property
    def stake_tokens(self) -> str:
        whole, frac = divmod(self.stake, PLANCKS_PER_TOKEN)
        text = f"{whole}.{frac:012d}".rstrip("0").rstrip(".")
        return text


def _registration(account: str, value: dict[str, Any]) -> Registration:
    return Registration(
        account=account,
        stake=int(value["stake"]),
        attestation_hash=str(value["attestation_hash"]).lower(),
        last_heartbeat_epoch=int(value.get("last_heartbeat_epoch", 0)),
        registered_at=None if value.get("registered_at") is None
        else int(value["registered_at"]),
    )


class ChainReader:
    """One HTTP client (no socket to go stale), rebuilt after a failure; the operators map is
    cached for ``cache_s`` so a busy list page does not read the whole map per request."""

    def __init__(self, rpc_url: str, cache_s: float, timeout_s: float) -> None:
        self.url = http_url(rpc_url)
        self.cache_s = cache_s
        # A hung node fails the read within this, instead of holding every page behind the lock.
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._client: SubstrateInterface | None = None
        self._cache: tuple[float, list[Registration]] | None = None

    def _substrate(self) -> SubstrateInterface:
        if self._client is None:
            self._client = chain_substrate.connect(self.url, self.timeout_s)
        return self._client

    def _run(self, fn: Any) -> Any:
        with self._lock:
            try:
                return fn(self._substrate())
            except Exception as exc:  # any transport or decoding failure: rebuild next time
                self._client = None
                raise ChainUnavailable(f"the chain at {self.url} cannot be read"
                                       f" ({type(exc).__name__}: {exc})") from None

    def operators(self) -> list[Registration]:
        now = time.monotonic()
        if self._cache and now - self._cache[0] < self.cache_s:
            return self._cache[1]

        def read(substrate: SubstrateInterface) -> list[Registration]:
            out = []
            for key, value in substrate.query_map(PALLET, "Operators", page_size=200):
                out.append(_registration(str(key.value), value.value))
            return out

        result = self._run(read)
        self._cache = (now, result)
        return result

    def carrying(self, report_hash: str) -> list[Registration]:
        return [r for r in self.operators() if r.attestation_hash == report_hash.lower()]

    def registration(self, account: str) -> Registration | None:
        def read(substrate: SubstrateInterface) -> Registration | None:
            value = substrate.query(PALLET, "Operators", [account]).value
            return None if value is None else _registration(account, value)

        return self._run(read)

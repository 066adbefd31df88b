"""A node's state as one record, and waiting for conditions on it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from ops_tools.chain.rpc import RpcClient, RpcError
from ops_tools.errors import OpsError


@dataclass(frozen=True)
class NodeStatus:
    url: str
    reachable: bool
    genesis_hash: str | None = None
    best: int | None = None
    finalized: int | None = None
    peers: int | None = None
    is_syncing: bool | None = None
    version: str | None = None
    chain: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def node_status(url: str, timeout: float = 5.0) -> NodeStatus:
    client = RpcClient(url, timeout)
    try:
        health = client.call("system_health")
        return NodeStatus(
            url=url,
            reachable=True,
            genesis_hash=client.genesis_hash(),
            best=client.best_number(),
            finalized=client.finalized_number(),
            peers=int(health["peers"]),
            is_syncing=bool(health["isSyncing"]),
            version=str(client.call("system_version")),
            chain=str(client.call("system_chain")),
        )
    except RpcError as exc:
        return NodeStatus(url=url, reachable=False, error=str(exc))


class WaitTimeout(OpsError):
    pass


def wait_for(
    what: str,
    probe: Callable[[], tuple[bool, str]],
    timeout_s: float,
    interval_s: float = 0.5,
) -> str:
    """Poll ``probe`` (-> done, what was seen) until done; on time-out say expected and seen."""
    deadline = time.monotonic() + timeout_s
    seen = "nothing yet"
    while True:
        try:
            done, seen = probe()
        except RpcError as exc:
            done, seen = False, str(exc)
        if done:
            return seen
        if time.monotonic() >= deadline:
            raise WaitTimeout(
                f"timed out after {timeout_s:.0f} s waiting for {what}; last seen: {seen}"
            )
        time.sleep(interval_s)


def wait_serving(url: str, genesis_hash: str, timeout_s: float) -> None:
    client = RpcClient(url, timeout=3)

    def probe() -> tuple[bool, str]:
        served = client.genesis_hash()
        return served == genesis_hash, f"genesis {served}"

    wait_for(f"{url} to serve genesis {genesis_hash}", probe, timeout_s)


def wait_finality_advances(url: str, timeout_s: float, blocks: int = 1) -> tuple[int, int]:
    """Wait until the finalized height grows by ``blocks``; returns (start, reached)."""
    client = RpcClient(url, timeout=3)
    start = client.finalized_number()
    reached = start

    def probe() -> tuple[bool, str]:
        nonlocal reached
        reached = client.finalized_number()
        return reached >= start + blocks, f"finalized #{reached} (started at #{start})"

    wait_for(f"finality to advance by {blocks} block(s) on {url}", probe, timeout_s)
    return start, reached

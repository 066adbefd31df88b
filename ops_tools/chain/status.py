"""Waiting for conditions on live nodes, with time-outs that say what was expected and seen."""

from __future__ import annotations

import time
from collections.abc import Callable

from ops_tools.chain.rpc import RpcClient, RpcError
from ops_tools.errors import OpsError


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


def wait_serving(url: str, genesis_hash: str, timeout_s: float, interval_s: float = 0.5) -> None:
    client = RpcClient(url, timeout=3)

    def probe() -> tuple[bool, str]:
        served = client.genesis_hash()
        return served == genesis_hash, f"genesis {served}"

    wait_for(f"{url} to serve genesis {genesis_hash}", probe, timeout_s, interval_s)


def wait_finality_advances(
    url: str, timeout_s: float, blocks: int = 1, since: int | None = None,
    interval_s: float = 0.5,
) -> tuple[int, int]:
    """Wait until the finalized height grows by ``blocks`` from now, or from ``since`` (a height
    read earlier on the same chain); returns (start, reached)."""
    client = RpcClient(url, timeout=3)
    if since is None:
        # A node just (re)started may refuse connections for a moment: waited for like the rest.
        heights: list[int] = []

        def first() -> tuple[bool, str]:
            heights.append(client.finalized_number())
            return True, f"finalized #{heights[-1]}"

        wait_for(f"{url} to answer", first, timeout_s, interval_s)
        since = heights[-1]
    start = reached = since

    def probe() -> tuple[bool, str]:
        nonlocal reached
        reached = client.finalized_number()
        return reached >= start + blocks, f"finalized #{reached} (started at #{start})"

    wait_for(f"finality to advance by {blocks} block(s) on {url}", probe, timeout_s, interval_s)
    return start, reached


def wait_finality_stalls(url: str, window_s: float, timeout_s: float,
                         interval_s: float = 0.5) -> int:
    """Wait until the finalized height has not changed for ``window_s``; returns that height."""
    client = RpcClient(url, timeout=3)
    last: int | None = None
    since = time.monotonic()

    def probe() -> tuple[bool, str]:
        nonlocal last, since
        height, now = client.finalized_number(), time.monotonic()
        if height != last:
            last, since = height, now
        return now - since >= window_s, f"finalized #{height}, unchanged for {now - since:.0f} s"

    wait_for(f"finality to stall on {url} (no new finalized block for {window_s:.0f} s)", probe,
             timeout_s, interval_s)
    assert last is not None
    return last

"""Whether a Substrate node is ready, from its JSON-RPC on the host itself: it answers, it is
this node (its peer id), it serves the expected genesis, and (after a start) blocks advance.
net_service_converge asks it for every node it converges."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ansible_collections.net.ops.plugins.module_utils.net_rpc import RpcError, block_number, call

POLL = 0.5


class NotReady(Exception):
    """The node is not ready; the message says what was expected and what was seen."""


def _identity(url: str) -> str | None:
    try:
        peer = call(url, "system_localPeerId", [])
    except RpcError as exc:
        # A node without the method cannot be told apart; the genesis check still applies.
        if "-32601" in str(exc) or "not found" in str(exc).lower():
            return None
        raise
    return peer if isinstance(peer, str) else None


def _first_answer(url: str, deadline: float, peer_id: str, timeout: int,
                  stopped: Callable[[], str] | None) -> str:
    last = "not tried"
    asked = 0.0
    while True:
        try:
            genesis = call(url, "chain_getBlockHash", [0])
            served_peer = _identity(url) if peer_id else None
            if served_peer is not None and served_peer != peer_id:
                last = f"another node answers there (peer id {served_peer}, expected {peer_id})"
                if time.monotonic() >= deadline:
                    raise NotReady(
                        f"expected this node at {url} within {timeout} s, but {last}: is another"
                        " network on the same ports? Stop it, or give this one other ports")
            elif isinstance(genesis, str):
                return genesis
            else:
                last = f"chain_getBlockHash [0] returned {genesis!r}"
        except RpcError as exc:
            last = str(exc)
        if time.monotonic() >= deadline:
            raise NotReady(f"expected the node's RPC at {url} to answer within {timeout} s;"
                           f" last seen: {last}")
        if stopped is not None and time.monotonic() - asked >= 1.0:
            asked = time.monotonic()
            state = stopped()
            if state:
                raise NotReady(f"the node's service has stopped ({state}) before its RPC at"
                               f" {url} answered; last seen: {last}")
        time.sleep(POLL)


def _best(url: str) -> int | None:
    return block_number(call(url, "chain_getHeader", []))


def wait_node_ready(url: str, genesis_hash: str, timeout: int = 60, peer_id: str = "",
                    require_advance: bool = True, block_timeout: int = 30,
                    running: Callable[[], tuple[str, bool]] | None = None,
                    stopped: Callable[[], str] | None = None) -> dict[str, Any]:
    """Wait until the node at ``url`` is ready; returns genesis_hash, best and peers, or raises
    NotReady. ``running`` (the service manager's (state, running)) is asked once the node is
    ready: a node whose process died at start, its port taken, fails while something else
    answers there. ``stopped`` (the state a program stopped for good in, else "") is asked while
    the RPC does not answer yet: a node that will not come back fails at once."""
    served = _first_answer(url, time.monotonic() + timeout, peer_id, timeout, stopped)
    if served.lower() != genesis_hash.lower():
        raise NotReady(f"the node at {url} serves genesis {served}, expected"
                       f" {genesis_hash.lower()} (the render manifest's); it runs another chain"
                       " spec or stale chain data")
    try:
        first = best = _best(url)
        if require_advance:
            deadline = time.monotonic() + block_timeout
            while best is None or first is None or best <= first:
                if time.monotonic() >= deadline:
                    health = call(url, "system_health", [])
                    raise NotReady(f"expected the best block at {url} to advance past #{first}"
                                   f" within {block_timeout} s; it is still #{best}"
                                   f" (system_health: {health})")
                time.sleep(POLL)
                best = _best(url)
                if first is None:
                    first = best
        health = call(url, "system_health", [])
    except RpcError as exc:
        raise NotReady(f"the node at {url} stopped answering while waiting for blocks: {exc}") \
            from None
    if running is not None:
        state, up = running()
        if not up:
            raise NotReady(f"the node's RPC at {url} is ready, but its service is not running"
                           f" ({state}): something else answers on its port, such as another"
                           " network on the same ports")
    return {"genesis_hash": served, "best": best,
            "peers": health.get("peers") if isinstance(health, dict) else None}

#!/usr/bin/python
"""Wait until a node is ready: its RPC answers, it serves the expected genesis, blocks advance."""

from __future__ import annotations

import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.net.ops.plugins.module_utils.net_rpc import RpcError, block_number, call
from ansible_collections.net.ops.plugins.module_utils.net_service import (
    ServiceStateError,
    service_state,
)

DOCUMENTATION = r"""
module: net_node_wait
short_description: Wait until a Substrate node serves the expected genesis and imports blocks
author: NET ops suite
description:
  - >-
    Polls the node's JSON-RPC on the host itself. Fails with a message naming what was expected
    and what was seen: no answer within I(timeout), a different genesis hash, or a best block
    that did not advance within I(block_timeout).
options:
  url: {description: JSON-RPC HTTP endpoint, type: str, required: true}
  genesis_hash: {description: "expected chain_getBlockHash [0]", type: str, required: true}
  timeout: {description: seconds to wait for the first answer, type: int, default: 60}
  require_advance: {description: wait for the best block to advance, type: bool, default: true}
  block_timeout: {description: seconds to wait for a new best block, type: int, default: 30}
  log_hint:
    description: where the node's log is, quoted in failure messages
    type: str
    default: ""
  peer_id:
    description:
      - >-
        The node's own peer id (from its node key). When given, the answering node must be this
        one (system_localPeerId): another process on the port, such as a second network on the
        same ports, would otherwise pass for it.
    type: str
    default: ""
  service_manager:
    description:
      - When given, the node's service must still be running once the node is ready (a node whose
        process died at start, its port taken, fails here while something else answers there).
    type: str
    choices: [supervisor, systemd]
  service_name: {description: program or unit name (without .service), type: str, default: ""}
  supervisor_conf:
    description: supervisord.conf of the project's supervisord
    type: path
    default: ""
"""

RETURN = r"""
genesis_hash: {description: served genesis hash, type: str, returned: always}
best: {description: best block number when ready, type: int, returned: success}
peers: {description: system_health peers when ready, type: int, returned: success}
waited: {description: seconds spent, type: float, returned: always}
"""

POLL = 0.5


class OtherNode(Exception):
    """Someone else answers on the node's RPC port."""


def _identity(url: str) -> str | None:
    try:
        peer = call(url, "system_localPeerId", [])
    except RpcError as exc:
        # A node without the method cannot be told apart; the genesis check still applies.
        if "-32601" in str(exc) or "not found" in str(exc).lower():
            return None
        raise
    return peer if isinstance(peer, str) else None


def _first_answer(url: str, deadline: float, peer_id: str) -> str:
    last = "not tried"
    while True:
        try:
            genesis = call(url, "chain_getBlockHash", [0])
            served_peer = _identity(url) if peer_id else None
            if served_peer is not None and served_peer != peer_id:
                last = f"another node answers there (peer id {served_peer}, expected {peer_id})"
                if time.monotonic() >= deadline:
                    raise OtherNode(last)
            elif isinstance(genesis, str):
                return genesis
            else:
                last = f"chain_getBlockHash [0] returned {genesis!r}"
        except RpcError as exc:
            last = str(exc)
        if time.monotonic() >= deadline:
            raise RpcError(last)
        time.sleep(POLL)


def _best(url: str) -> int | None:
    return block_number(call(url, "chain_getHeader", []))


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "genesis_hash": {"type": "str", "required": True},
            "timeout": {"type": "int", "default": 60},
            "require_advance": {"type": "bool", "default": True},
            "block_timeout": {"type": "int", "default": 30},
            "log_hint": {"type": "str", "default": ""},
            "peer_id": {"type": "str", "default": ""},
            "service_manager": {"type": "str", "choices": ["supervisor", "systemd"]},
            "service_name": {"type": "str", "default": ""},
            "supervisor_conf": {"type": "path", "default": ""},
        },
        supports_check_mode=True,
    )
    p = module.params
    hint = f"; see the node's log: {p['log_hint']}" if p["log_hint"] else ""
    start = time.monotonic()
    out: dict[str, Any] = {"changed": False}
    if module.check_mode:
        module.exit_json(skipped=True, msg="check mode: the node is not polled", **out)
    try:
        served = _first_answer(p["url"], start + p["timeout"], p["peer_id"])
    except OtherNode as exc:
        module.fail_json(
            msg=f"expected this node at {p['url']} within {p['timeout']} s, but {exc}: is"
            f" another network on the same ports? Stop it, or give this one other ports{hint}",
            waited=round(time.monotonic() - start, 1),
            **out,
        )
    except RpcError as exc:
        module.fail_json(
            msg=f"expected the node's RPC at {p['url']} to answer within {p['timeout']} s;"
            f" last seen: {exc}{hint}",
            waited=round(time.monotonic() - start, 1),
            **out,
        )
    out["genesis_hash"] = served
    want = p["genesis_hash"].lower()
    if served.lower() != want:
        module.fail_json(
            msg=f"the node at {p['url']} serves genesis {served}, expected {want} (the render"
            " manifest's); it runs another chain spec or stale chain data",
            waited=round(time.monotonic() - start, 1),
            **out,
        )
    try:
        first = _best(p["url"])
        best = first
        if p["require_advance"]:
            deadline = time.monotonic() + p["block_timeout"]
            while best is None or first is None or best <= first:
                if time.monotonic() >= deadline:
                    health = call(p["url"], "system_health", [])
                    module.fail_json(
                        msg=f"expected the best block at {p['url']} to advance past #{first}"
                        f" within {p['block_timeout']} s; it is still #{best}"
                        f" (system_health: {health}){hint}",
                        waited=round(time.monotonic() - start, 1),
                        **out,
                    )
                time.sleep(POLL)
                best = _best(p["url"])
                if first is None:
                    first = best
        health = call(p["url"], "system_health", [])
    except RpcError as exc:
        module.fail_json(
            msg=f"the node at {p['url']} stopped answering while waiting for blocks: {exc}{hint}",
            waited=round(time.monotonic() - start, 1),
            **out,
        )
    out["best"] = best
    out["peers"] = health.get("peers") if isinstance(health, dict) else None
    if p["service_manager"]:
        try:
            state, running = service_state(
                p["service_manager"], p["service_name"], p["supervisor_conf"]
            )
        except ServiceStateError as exc:
            state, running = str(exc), False
        if not running:
            module.fail_json(
                msg=f"the node's RPC at {p['url']} is ready, but its service"
                f" {p['service_name']} is not running ({state}): something else answers on"
                f" its port, such as another network on the same ports{hint}",
                waited=round(time.monotonic() - start, 1),
                **out,
            )
    out["waited"] = round(time.monotonic() - start, 1)
    module.exit_json(**out)


if __name__ == "__main__":
    main()

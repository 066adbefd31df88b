#!/usr/bin/python
"""Wait until a node is ready: its RPC answers, it serves the expected genesis, blocks advance."""

from __future__ import annotations

import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.net_rpc import RpcError, block_number, call

DOCUMENTATION = r"""
module: net_node_wait
short_description: Wait until a Substrate node serves the expected genesis and imports blocks
description:
  - Polls the node's JSON-RPC on the host itself. Fails with a message naming what was expected
    and what was seen: no answer within I(timeout), a different genesis hash, or a best block
    that did not advance within I(block_timeout).
options:
  url: {description: JSON-RPC HTTP endpoint, type: str, required: true}
  genesis_hash: {description: expected chain_getBlockHash [0], type: str, required: true}
  timeout: {description: seconds to wait for the first answer, type: int, default: 60}
  require_advance: {description: wait for the best block to advance, type: bool, default: true}
  block_timeout: {description: seconds to wait for a new best block, type: int, default: 30}
  log_hint: {description: where the node's log is, quoted in failure messages, type: str}
"""

RETURN = r"""
genesis_hash: {description: served genesis hash, type: str, returned: always}
best: {description: best block number when ready, type: int, returned: success}
peers: {description: system_health peers when ready, type: int, returned: success}
waited: {description: seconds spent, type: float, returned: always}
"""

POLL = 0.5


def _first_answer(url: str, deadline: float) -> str:
    last = "not tried"
    while True:
        try:
            genesis = call(url, "chain_getBlockHash", [0])
            if isinstance(genesis, str):
                return genesis
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
        served = _first_answer(p["url"], start + p["timeout"])
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
    out["waited"] = round(time.monotonic() - start, 1)
    module.exit_json(**out)


if __name__ == "__main__":
    main()

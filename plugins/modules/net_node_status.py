#!/usr/bin/python
"""Gather a node's live state over JSON-RPC on its host; never fails, records errors instead."""

from __future__ import annotations

from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.net.ops.plugins.module_utils.net_rpc import RpcError, block_number, call

DOCUMENTATION = r"""
module: net_node_status
short_description: Read genesis, best and finalized heads, health and version of a node
author: NET ops suite
description:
  - Calls chain_getBlockHash [0], chain_getHeader, chain_getFinalizedHead (and the finalized
    header), system_health and system_version. A node that is down is not a failure; the
    result's C(rpc.ok) is false and C(rpc.error) says what happened.
options:
  url: {description: JSON-RPC HTTP endpoint, type: str, required: true}
  timeout: {description: seconds per call, type: float, default: 3}
"""

RETURN = r"""
rpc: {description: "url, ok, error, genesis_hash, best {number, hash}, finalized {number, hash},
  health, version", type: dict, returned: always}
"""


def gather(url: str, timeout: float) -> dict[str, Any]:
    rpc: dict[str, Any] = {
        "url": url,
        "ok": False,
        "error": None,
        "genesis_hash": None,
        "best": None,
        "finalized": None,
        "health": None,
        "version": None,
    }
    try:
        rpc["genesis_hash"] = call(url, "chain_getBlockHash", [0], timeout)
        # The hash is asked for by number so that both describe the same block.
        best_number = block_number(call(url, "chain_getHeader", [], timeout))
        best_hash = call(url, "chain_getBlockHash", [best_number], timeout)
        rpc["best"] = {"number": best_number, "hash": best_hash}
        fin_hash = call(url, "chain_getFinalizedHead", [], timeout)
        fin = call(url, "chain_getHeader", [fin_hash], timeout)
        rpc["finalized"] = {"number": block_number(fin), "hash": fin_hash}
        rpc["health"] = call(url, "system_health", [], timeout)
        rpc["version"] = call(url, "system_version", [], timeout)
        rpc["ok"] = True
    except RpcError as exc:
        rpc["error"] = str(exc)
    return rpc


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "timeout": {"type": "float", "default": 3.0},
        },
        supports_check_mode=True,
    )
    module.exit_json(changed=False, rpc=gather(module.params["url"], module.params["timeout"]))


if __name__ == "__main__":
    main()

"""A network definition (+ a runtime blob) as a plain chain spec with a ``runtimeGenesis`` patch."""

from __future__ import annotations

from typing import Any

from ops_tools.chainspec.network import Network


def plain_spec(network: Network, runtime: bytes) -> dict[str, Any]:
    d = network.data
    boot_nodes = [f"{a['address']}/p2p/{a['peer_id']}" for a in d["authorities"]]
    # Order-insensitive inputs are sorted, so that reordering a definition's lists of accounts
    # does not change the genesis; authority order is kept, as it is the authoring order.
    balances = sorted([a["address"], a["balance"]] for a in d["accounts"])
    return {
        "name": d["name"],
        "id": d["id"],
        "chainType": d["chain_type"],
        "bootNodes": boot_nodes,
        "telemetryEndpoints": None,
        "protocolId": d["protocol_id"],
        "properties": {
            "ss58Format": d["ss58_prefix"],
            "tokenDecimals": d["token"]["decimals"],
            "tokenSymbol": d["token"]["symbol"],
        },
        "codeSubstitutes": {},
        "genesis": {
            "runtimeGenesis": {
                "code": "0x" + runtime.hex(),
                "patch": {
                    "aura": {
                        "authorities": [a["aura"] for a in d["authorities"]],
                        "slotDurationMs": d["consensus"]["slot_duration_ms"],
                    },
                    "grandpa": {
                        "authorities": [
                            [a["grandpa"], a.get("weight", 1)] for a in d["authorities"]
                        ]
                    },
                    "balances": {"balances": balances},
                    "sudo": {"key": d["sudo"]},
                    "operatorStake": {
                        "minStake": d["operator_stake"]["min_stake"],
                        "epochLength": d["consensus"]["epoch_length_blocks"],
                        "maxHeartbeatEpochAdvance": d["operator_stake"][
                            "max_heartbeat_epoch_advance"
                        ],
                    },
                },
            }
        },
    }

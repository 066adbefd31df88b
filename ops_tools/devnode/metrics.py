"""Prometheus metrics under Substrate's names, served at ``/metrics``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from ops_tools.devnode.node import Node


def render(node: Node) -> str:
    chain = node.chain.spec.id
    genesis = "0x" + node.chain.genesis_hash.hex()
    lines = [
        "# HELP substrate_block_height Block height info of the chain",
        "# TYPE substrate_block_height gauge",
        f'substrate_block_height{{status="best",chain="{chain}"}} {node.chain.best.number}',
        f'substrate_block_height{{status="finalized",chain="{chain}"}}'
        f" {node.chain.finalized.number}",
        "# HELP substrate_sub_libp2p_peers_count Number of connected peers",
        "# TYPE substrate_sub_libp2p_peers_count gauge",
        f'substrate_sub_libp2p_peers_count{{chain="{chain}"}} {node.peer_count()}',
        "# HELP substrate_ready_transactions_number Number of transactions in the ready queue",
        "# TYPE substrate_ready_transactions_number gauge",
        f'substrate_ready_transactions_number{{chain="{chain}"}} {len(node.pool)}',
        "# HELP substrate_build_info A metric with a constant '1' value labeled by name, version",
        "# TYPE substrate_build_info gauge",
        f'substrate_build_info{{name="{node.name}",version="{node.version}",chain="{chain}"}} 1',
        # The chain id survives a reset, the genesis hash does not: nodes that disagree on it
        # serve different networks (roles/monitoring: NodesOnDifferentGenesis).
        "# HELP net_node_genesis_info The genesis hash this node serves (constant 1)",
        "# TYPE net_node_genesis_info gauge",
        f'net_node_genesis_info{{genesis_hash="{genesis}",chain="{chain}"}} 1',
        "",
    ]
    return "\n".join(lines)


def app(node: Node) -> web.Application:
    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=render(node), content_type="text/plain")

    application = web.Application()
    application.router.add_get("/metrics", metrics)
    return application

"""The repair plan: the network is on the expected genesis, but something in front of it is down.

What did not answer is started, or restarted when its process runs but does not answer
(authorities first, then the RPC and full nodes), through the service manager its host manifest
names, and each must serve the expected genesis again; a public endpoint that still does not
answer behind an edge has the edge re-converged by its role. No chain
data is touched: block heights continue and balances are kept.
"""

from __future__ import annotations

from ops_tools.chain.rpc import RpcClient, RpcError
from ops_tools.chain.status import WaitTimeout, wait_serving
from ops_tools.deploy.paths import PLAYBOOKS
from ops_tools.reset.context import CycleContext, CycleFailed
from ops_tools.reset.nodes import Node


def _answers(ctx: CycleContext, node: Node) -> str | None:
    genesis = ctx.node_rpc(node, "chain_getBlockHash", [0])
    return str(genesis) if genesis else None


def repair_nodes(ctx: CycleContext) -> str:
    expected = ctx.facts["expected_genesis"]
    done = []
    for nodes in (ctx.of_role("authority"), ctx.of_role("rpc", "full")):
        # Asked again now: a node that came back since compare is left alone.
        down = [n for n in nodes if _answers(ctx, n) is None]
        if not down:
            continue
        ctx.machines.run("start the nodes that are down",
                         {n.host: [n.restart_command()] for n in down})
        for node in down:

            def check(node: Node = node) -> tuple[bool, str]:
                genesis = _answers(ctx, node)
                header = ctx.node_rpc(node, "chain_getHeader") if genesis else None
                best = int(header["number"], 16) if header else None
                return genesis == expected and best is not None, f"genesis {genesis}, #{best}"

            seen = ctx.wait_on_host(node, f"serve genesis {expected} again", check)
            done.append(f"{node.host}: was down, started ({node.program.manager}),"
                        f" {seen}")
    return "; ".join(done) or "every node answers"


def repair_edge(ctx: CycleContext) -> str:
    url = ctx.public_url()
    expected = ctx.facts["expected_genesis"]
    try:
        if RpcClient(url, timeout=5).genesis_hash() == expected:
            return f"{url} serves {expected}"
    except RpcError as exc:
        failure = str(exc)
    else:
        failure = "it serves another genesis"
    edge = ctx.inventory.hosts("edge")
    if not edge:
        raise CycleFailed(
            f"every node serves {expected}, but the public endpoint {url} does not ({failure})"
            " and the inventory has no edge hosts to re-converge; check its DNS and what"
            " serves it. No chain data was touched"
        )
    from ops_tools.deploy.runner import run_playbook

    result = run_playbook(PLAYBOOKS / "edge.yml", ctx.opts.inventory, {})
    try:
        wait_serving(url, expected, ctx.opts.timeout_s)
    except (WaitTimeout, RpcError) as exc:
        raise CycleFailed(
            f"the edge ({', '.join(edge)}) was re-converged, but {url} still does not serve"
            f" {expected}: {exc}. No chain data was touched"
        ) from None
    return (f"{url} did not answer ({failure}); edge.yml re-converged {', '.join(edge)}"
            f" ({result.changed} change(s)); it serves {expected}")

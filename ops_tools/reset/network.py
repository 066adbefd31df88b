"""The phases that reset the chain itself: pre-flight, stop, purge and push, start, wait.

The RPC node (and any full node) is stopped first and the authorities last; the authorities are
reset and started first and must author and finalize on the new genesis before the RPC node is
touched again, so that a failure leaves the public endpoint down rather than serving a chain the
authorities do not.
"""

from __future__ import annotations

import time
from pathlib import Path

from ops_tools.chain.rpc import RpcError
from ops_tools.chain.status import WaitTimeout, wait_finality_advances, wait_serving
from ops_tools.checksums import sha256_file
from ops_tools.reset.context import CycleContext, CycleFailed
from ops_tools.reset.nodes import Node

MIN_FREE_BYTES = 512 * 1024 * 1024


def preflight(ctx: CycleContext) -> str:
    deployed = {n.manifest.get("genesis_hash") for n in ctx.nodes}
    if len(deployed) != 1:
        raise CycleFailed(f"the host manifests disagree on the deployed genesis: {deployed}")
    (deployed_genesis,) = deployed
    live = ctx.facts.get("public_genesis")
    if live is not None and live != deployed_genesis:
        raise CycleFailed(
            f"the live network at {ctx.public_url()} serves genesis {live}, but the inventory's"
            f" manifests say {deployed_genesis} is deployed there (wrong inventory or"
            " endpoint?); refusing to touch it"
        )
    for node in ctx.nodes:
        served = ctx.facts["node_genesis"].get(node.host)
        if served is not None and served != deployed_genesis:
            raise CycleFailed(
                f"{node.host} serves genesis {served}, its manifest says {deployed_genesis};"
                " refusing to touch it"
            )
        free = ctx.machines.free_bytes(node.host, node.manifest["base_path"])
        if free < MIN_FREE_BYTES:
            raise CycleFailed(
                f"{node.host}: only {free // 2**20} MiB free at {node.manifest['base_path']};"
                f" a reset needs {MIN_FREE_BYTES // 2**20} MiB"
            )
    return f"{len(ctx.nodes)} node(s) reachable, identity {deployed_genesis}"


def stop_services(ctx: CycleContext) -> str:
    ctx.facts.setdefault("downtime_from", time.time())
    ctx.machines.run("stop services", {h.host: [h.stop] for h in ctx.hooks})
    return ", ".join(h.name for h in ctx.hooks) or "no services declared"


def stop_nodes(ctx: CycleContext) -> str:
    # Public endpoint first, authorities last; the nodes of one step stop at once (several
    # nodes on one machine, as on the local network, need not wait for each other's shutdown).
    # restart-services stopped the RPC and full nodes with its restarts in this run; a resumed
    # cycle stops them again (a stop of a stopped node is a no-op).
    done = set() if ctx.opts.resume else set(ctx.facts.get("stopped_with_services", []))
    steps = [[n for n in ctx.of_role("rpc", "full") if n.host not in done],
             ctx.of_role("authority")]
    for nodes in steps:
        ctx.machines.run(f"stop {', '.join(n.host for n in nodes)}",
                         {n.host: [n.stop_command()] for n in nodes}, parallel=True)
    return ", ".join(n.host for nodes in steps for n in nodes)


def _reset_nodes(ctx: CycleContext, nodes: list[Node]) -> str:
    binary = Path(ctx.facts["node_binary"])
    spec = Path(ctx.facts["render_dir"]) / "raw.json"
    push = {
        n.host: [
            (binary, n.manifest["binary"]["path"], "755"),
            (spec, n.manifest["chainspec_path"], "644"),
        ]
        for n in nodes
    }
    if ctx.opts.resume:
        # Done again by a resumed cycle: its nodes may have been started on what was pushed
        # (a database is never purged under a running node), and what is on the host may be
        # anything, so the purge reads the new spec, pushed first.
        ctx.machines.run("stop before the purge",
                         {n.host: [n.stop_command()] for n in nodes})
        ctx.machines.put("push binary and spec", push)
        ctx.machines.run("purge chain data", {n.host: [n.purge_command()] for n in nodes})
    else:
        # The purge reads the spec on the host: the old chain's database is the one deleted.
        ctx.machines.run("purge chain data", {n.host: [n.purge_command()] for n in nodes})
        ctx.machines.put("push binary and spec", push)
    want = {"binary": ctx.facts["binary_sha256"], "spec": sha256_file(spec)}
    for n in nodes:
        for what, path in (
            ("binary", n.manifest["binary"]["path"]),
            ("spec", n.manifest["chainspec_path"]),
        ):
            got = ctx.machines.sha256(n.host, path)
            if got != want[what]:
                raise CycleFailed(
                    f"{n.host}: pushed {what} {path} has sha256 {got}, expected {want[what]}"
                )
    return ", ".join(n.host for n in nodes)


def reset_authorities(ctx: CycleContext) -> str:
    return _reset_nodes(ctx, ctx.of_role("authority"))


def reset_rpc(ctx: CycleContext) -> str:
    return _reset_nodes(ctx, ctx.of_role("rpc", "full"))


def _start(ctx: CycleContext, nodes: list[Node]) -> str:
    # At once: supervisorctl waits for each program's startsecs, one after the other otherwise.
    ctx.machines.run("start nodes", {n.host: [n.start_command()] for n in nodes}, parallel=True)
    return ", ".join(n.host for n in nodes)


def start_authorities(ctx: CycleContext) -> str:
    return _start(ctx, ctx.of_role("authority"))


def start_rpc(ctx: CycleContext) -> str:
    return _start(ctx, ctx.of_role("rpc", "full"))


def _heights(ctx: CycleContext, node: Node) -> tuple[str | None, int | None, int | None]:
    genesis = ctx.node_rpc(node, "chain_getBlockHash", [0])
    header = ctx.node_rpc(node, "chain_getHeader")
    fin_hash = ctx.node_rpc(node, "chain_getFinalizedHead")
    fin = ctx.node_rpc(node, "chain_getHeader", [fin_hash])
    best = int(header["number"], 16) if header else None
    finalized = int(fin["number"], 16) if fin else None
    return genesis, best, finalized


def wait_finality(ctx: CycleContext) -> str:
    expected = ctx.facts["expected_genesis"]
    seen = []
    for node in ctx.of_role("authority"):

        def check(node: Node = node) -> tuple[bool, str]:
            genesis, best, finalized = _heights(ctx, node)
            ok = genesis == expected and (best or 0) >= 2 and (finalized or 0) >= 1
            return ok, f"genesis {genesis}, best #{best}, finalized #{finalized}"

        seen.append(
            f"{node.host}: "
            + ctx.wait_on_host(node, "author blocks and finalize on the new genesis", check)
        )
    return "; ".join(seen)


def verify(ctx: CycleContext) -> str:
    expected = ctx.facts["expected_genesis"]
    for node in ctx.nodes:

        def check(node: Node = node) -> tuple[bool, str]:
            # Two calls, not _heights' four: on a remote host each is a command over SSH, and
            # this wait is inside the downtime.
            genesis = ctx.node_rpc(node, "chain_getBlockHash", [0])
            header = ctx.node_rpc(node, "chain_getHeader") if genesis == expected else None
            best = int(header["number"], 16) if header else None
            return genesis == expected and best is not None, f"genesis {genesis}, best #{best}"

        ctx.wait_on_host(node, f"serve genesis {expected}", check)
    url = ctx.public_url()
    try:
        wait_serving(url, expected, ctx.opts.timeout_s)
        wait_finality_advances(url, ctx.opts.timeout_s)
    except (WaitTimeout, RpcError) as exc:
        raise CycleFailed(
            f"the public endpoint {url} does not serve genesis {expected} with finality"
            f" advancing: {exc}"
        ) from None
    ctx.facts.setdefault("downtime_to", time.time())
    return f"every node and {url} serve {expected}; finality advancing"

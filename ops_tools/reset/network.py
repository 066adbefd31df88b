"""The phases that reset the chain itself: pre-flight, stop, purge and push, start, wait.

The RPC node (and any full node) is stopped first and the authorities last; the authorities are
reset and started first and must author and finalize on the new genesis before the RPC node is
touched again, so that a failure leaves the public endpoint down rather than serving a chain the
authorities do not.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

from ops_tools.chain.rpc import RpcError
from ops_tools.chain.status import WaitTimeout, wait_finality_advances, wait_serving
from ops_tools.checksums import sha256_file
from ops_tools.reset.context import WINDOW_POLL_S, CycleContext, CycleFailed
from ops_tools.reset.nodes import HostOpFailed, Node
from ops_tools.reset.shell import in_order

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
    # restart-services stopped the RPC and full nodes with its restarts in this run (and the
    # authorities where the order held on one machine). The authorities left running stop in
    # reset-authorities' command, before their purge: that phase comes after this one, so the
    # order holds, and the window saves a round trip to their machines. A resumed cycle stops
    # every node here (a stop of a stopped node is a no-op).
    resume = ctx.opts.resume
    done = set() if resume else set(ctx.facts.get("stopped_with_services", []))
    public = [n for n in ctx.of_role("rpc", "full") if n.host not in done]
    authorities = [n for n in ctx.of_role("authority") if n.host not in done]
    steps = [public, authorities] if resume else [public]
    for nodes in steps:
        if nodes:
            ctx.machines.run(f"stop {', '.join(n.host for n in nodes)}",
                             {n.host: [n.stop_command()] for n in nodes}, parallel=True)
    stopped = [n.host for nodes in steps for n in nodes]
    ctx.facts["stopped_nodes"] = sorted(set(ctx.facts.get("stopped_nodes", [])) | set(stopped))
    with_services = [h for h in done if h not in stopped]
    later = [] if resume else [f"{n.host} (with the reset's command)" for n in authorities]
    return ", ".join(stopped + [f"{h} (with the services)" for h in sorted(with_services)]
                     + later) or "nothing left running"


# Where stage-nodes puts the new binary and spec beside the live ones, before the downtime; the
# purge's command renames them into place (a rename on the same filesystem: instant, atomic).
STAGED = ".reset-next"


def _pushed(ctx: CycleContext, node: Node) -> list[tuple[str, str, str]]:
    """(what, path on the host, its expected sha256) of the binary and spec the cycle pushes."""
    spec = Path(ctx.facts["render_dir"]) / "raw.json"
    return [("binary", node.manifest["binary"]["path"], ctx.facts["binary_sha256"]),
            ("spec", node.manifest["chainspec_path"], sha256_file(spec))]


def _check_command(files: list[tuple[str, str, str]]) -> str:
    """Succeeds when every file has its sha256; else prints what each one has, and fails."""
    lines = "".join(f"{want}  {path}\n" for _, path, want in files)
    paths = " ".join(shlex.quote(path) for _, path, _ in files)
    return (f"printf %s {shlex.quote(lines)} | sha256sum -c --status -"
            f" || {{ sha256sum {paths} >&2; exit 3; }}")


def stage_nodes(ctx: CycleContext) -> str:
    # Outside the downtime: the new binary and spec go to every node's host beside the live
    # ones (STAGED) and are checked there, so that the window's work on a host is a purge, two
    # renames and a start, in one command.
    binary = Path(ctx.facts["node_binary"])
    spec = Path(ctx.facts["render_dir"]) / "raw.json"
    ctx.machines.put("push binary and spec (staged)", {
        n.host: [(binary, n.manifest["binary"]["path"] + STAGED, "755"),
                 (spec, n.manifest["chainspec_path"] + STAGED, "644")]
        for n in ctx.nodes
    })
    checks = {n.host: [_check_command([(w, p + STAGED, sha) for w, p, sha in _pushed(ctx, n)])]
              for n in ctx.nodes}
    try:
        ctx.machines.run("check the staged binary and spec", checks, parallel=True)
    except HostOpFailed as exc:
        raise CycleFailed(f"a staged binary or spec does not have the built sha256: {exc}"
                          f" (binary {ctx.facts['binary_sha256']}, spec"
                          f" {sha256_file(spec)})") from None
    return f"binary and spec staged and checked on {', '.join(n.host for n in ctx.nodes)}"


def drop_staged(ctx: CycleContext) -> None:
    """Staged files a resumed cycle pushed again for nodes whose reset it then found done."""
    ctx.machines.run("remove leftover staged files", {
        n.host: [shlex.join(["rm", "-f", *(path + STAGED for _, path, _ in _pushed(ctx, n))])]
        for n in ctx.nodes
    })


def _reset_command(ctx: CycleContext, node: Node) -> str:
    files = _pushed(ctx, node)
    place = " && ".join(shlex.join(["mv", "-f", path + STAGED, path]) for _, path, _ in files)
    if ctx.opts.resume:
        # Done again by a resumed cycle: its nodes may have been started on what was pushed
        # (a database is never purged under a running node), and what is on the host may be
        # anything, so the purge reads the new spec, put in place first.
        steps = [node.stop_command(), place, node.purge_command()]
    else:
        # The purge reads the spec on the host: the old chain's database is the one deleted.
        # A node this run has not stopped yet (an authority on a machine of its own, left
        # running by stop-nodes) stops first, in the same command.
        stopped = {*ctx.facts.get("stopped_with_services", []),
                   *ctx.facts.get("stopped_nodes", [])}
        steps = [] if node.host in stopped else [node.stop_command()]
        steps += [node.purge_command(), place]
    # The node starts only on the binary and spec that check out.
    steps += [_check_command(files), node.start_command()]
    return in_order(steps)


def _reset_nodes(ctx: CycleContext, nodes: list[Node]) -> str:
    # One command per host, its nodes at once: purge, the staged binary and spec renamed into
    # place, their sha256 checked, start. Their start-up then overlaps the rest of the batch.
    if not nodes:
        return "no nodes"
    try:
        ctx.machines.run("purge, put in place, check, start",
                         {n.host: [_reset_command(ctx, n)] for n in nodes}, parallel=True)
    except HostOpFailed as exc:
        want = ", ".join(f"{what} {sha}" for what, _, sha in _pushed(ctx, nodes[0]))
        raise CycleFailed(f"{exc}; expected {want} (a node whose files do not check out is not"
                          " started)") from None
    started = set(ctx.facts.get("started_with_reset", []))
    ctx.facts["started_with_reset"] = sorted(started | {n.host for n in nodes})
    return ", ".join(n.host for n in nodes) + ": purged, binary and spec in place, started"


def reset_authorities(ctx: CycleContext) -> str:
    return _reset_nodes(ctx, ctx.of_role("authority"))


def reset_rpc(ctx: CycleContext) -> str:
    return _reset_nodes(ctx, ctx.of_role("rpc", "full"))


def _start(ctx: CycleContext, nodes: list[Node]) -> str:
    # The reset's command started them in this run; a resumed cycle starts them again (a start
    # of a started node is a no-op). At once: supervisorctl waits for each program's startsecs.
    done = set() if ctx.opts.resume else set(ctx.facts.get("started_with_reset", []))
    todo = [n for n in nodes if n.host not in done]
    ctx.machines.run("start nodes", {n.host: [n.start_command()] for n in todo}, parallel=True)
    if not todo:
        return ", ".join(n.host for n in nodes) + ": started by the reset's command"
    return ", ".join(n.host for n in todo)


def start_authorities(ctx: CycleContext) -> str:
    return _start(ctx, ctx.of_role("authority"))


def start_rpc(ctx: CycleContext) -> str:
    return _start(ctx, ctx.of_role("rpc", "full"))


def wait_finality(ctx: CycleContext) -> str:
    expected = ctx.facts["expected_genesis"]
    finalized_at: list[int] = []

    def wait(node: Node) -> str:
        genesis, best, finalized = ctx.wait_heights(
            node, "author blocks and finalize on the new genesis", expected, min_best=2,
            min_finalized=1)
        finalized_at.append(finalized or 0)
        return f"{node.host}: genesis {genesis}, best #{best}, finalized #{finalized}"

    ctx.connect_for(ctx.of_role("authority"))
    seen = ctx.wait_on_hosts([lambda n=n: wait(n) for n in ctx.of_role("authority")])
    if finalized_at:
        ctx.facts["new_finalized"] = min(finalized_at)
    return "; ".join(seen)


def verify(ctx: CycleContext) -> str:
    # Every node waited for at once, each on its host (one command), then the public
    # endpoint, which comes up with the RPC node behind it (asked before, each poll was a TLS
    # handshake through the edge to a node still starting, on the CPU it needed).
    expected = ctx.facts["expected_genesis"]
    url = ctx.public_url()
    # Finality advancing: the public endpoint finalizes past what the authorities had
    # finalized on this genesis at wait-finality (a resumed cycle without that reading waits
    # for one more block from now).
    since = ctx.facts.get("new_finalized")

    def node_serves(node: Node) -> str:
        _, best, _ = ctx.wait_heights(node, f"serve genesis {expected}", expected)
        return f"{node.host}: best #{best}"

    def public_serves() -> str:
        try:
            with ctx.timed(f"wait for {url}: the new genesis"):
                wait_serving(url, expected, ctx.opts.timeout_s, interval_s=WINDOW_POLL_S)
            with ctx.timed(f"wait for {url}: finality advancing"):
                wait_finality_advances(url, ctx.opts.timeout_s, since=since,
                                       interval_s=WINDOW_POLL_S)
        except (WaitTimeout, RpcError) as exc:
            raise CycleFailed(
                f"the public endpoint {url} does not serve genesis {expected} with finality"
                f" advancing: {exc}"
            ) from None
        return url

    ctx.connect_for(ctx.nodes)
    ctx.wait_on_hosts([lambda n=n: node_serves(n) for n in ctx.nodes])
    public_serves()
    ctx.facts.setdefault("downtime_to", time.time())
    return f"every node and {url} serve {expected}; finality advancing"

"""The inspection phases: build the ref, render its chain spec, ask the network what it serves,
decide. They change no host, so --dry-run runs exactly these.

The no-change decision is the common case (a timer runs the cycle on every pallet-suite commit),
so they stay cheap: the build code and the renderer are imported only when used, nodes on this
machine are asked directly (no pyinfra session) and all at once, and a render already done for
the same inputs is reused once it checks out (``render_cache``).
"""

from __future__ import annotations

import hashlib
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ops_tools.build.devnode_probe import devnode_version, find_devnode
from ops_tools.chain.rpc import RpcClient, RpcError
from ops_tools.chainspec import render_cache
from ops_tools.checksums import sha256_file
from ops_tools.reset.context import (
    PUBLIC_PROBE_INTERVAL_S,
    PUBLIC_PROBES,
    RPC_TIMEOUT_S,
    CycleContext,
    CycleFailed,
)
from ops_tools.reset.decide import Decision, Observed, decide
from ops_tools.reset.nodes import Node
from ops_tools.sources import devnode_source_digest


def _devnode_version() -> str:
    return devnode_version(find_devnode())


def build(ctx: CycleContext) -> str:
    with ThreadPoolExecutor(max_workers=1) as pool:
        # `devnode --version` (a Python process) runs while this one loads the build code and
        # resolves the ref: both take a few tenths of a second.
        version = pool.submit(_devnode_version) if ctx.devnode else None
        from ops_tools.build.builder import BuildRequest, build
        from ops_tools.build.devnode_artifact import make_devnode_artifact

        o = ctx.opts
        # A resumed cycle whose artifact is gone builds the revision it journaled, not what the
        # ref names now: the render and the reset in progress are of that revision.
        ref = ctx.facts.get("revision") or o.ref if o.resume else o.ref
        result = build(BuildRequest(repo=o.repo, ref=ref, cache=o.build_cache))
        artifact = result.artifact
        if version is not None:
            artifact = make_devnode_artifact(
                artifact.directory, cache=o.build_cache, version=version.result()
            )
    ctx.facts.update(
        revision=result.artifact.manifest["revision"],
        artifact_dir=str(artifact.directory),
        node_binary=str(artifact.node_binary),
        runtime=str(artifact.runtime),
        binary_sha256=sha256_file(artifact.node_binary),
        runtime_sha256=sha256_file(artifact.runtime),
        node_version=artifact.manifest.get("node_version"),
        devnode=ctx.devnode,
    )
    if ctx.devnode and not all(ctx.on_this_machine(h) for h in ctx.node_hosts()):
        # The artifact's binary is a launcher for this machine's devnode, which a remote host
        # does not have: remote hosts run the development node as one file.
        bundle = _devnode_bundle(ctx, version.result() if version else "")
        ctx.facts.update(node_binary=str(bundle), binary_sha256=sha256_file(bundle))
    hit = "cache hit" if result.cache_hit else "built"
    return f"{ctx.facts['revision'][:12]} ({hit})"


def _devnode_bundle(ctx: CycleContext, version: str) -> Path:
    """The development-node bundle (docs/build.md), kept per source and version: the same
    sources give the same bytes, so a no-change cycle finds the same binary deployed."""
    from ops_tools.build.devnode_bundle import build_devnode_bundle

    key = hashlib.sha256(
        f"{version}; {devnode_source_digest()}; {render_cache.renderer_version()}".encode()
    ).hexdigest()[:16]
    path = ctx.dir / "devnode-bundle" / key / "net-node"
    if not path.is_file():
        build_devnode_bundle(path)
    return path


def render(ctx: CycleContext) -> str:
    facts = ctx.facts
    network = ctx.network_file()
    out = ctx.dir / "render" / facts["revision"]
    genesis, reused = render_cache.render_cached(
        out,
        render_inputs(ctx, network),
        network,
        Path(facts["node_binary"]),
        Path(facts["runtime"]),
        pallet_suite_revision=facts["revision"],
    )
    journaled = facts.get("expected_genesis")
    if journaled is not None and genesis != journaled:
        raise CycleFailed(
            f"rendered again, revision {facts['revision'][:12]} gives genesis {genesis}, but the"
            f" resumed cycle was resetting onto {journaled}; inspect {ctx.dir / 'journal.json'}"
        )
    facts.update(render_dir=str(out), expected_genesis=genesis)
    return f"{genesis} (render reused: same inputs, checked)" if reused else genesis


def render_inputs(ctx: CycleContext, network: Path) -> render_cache.RenderInputs | None:
    facts = ctx.facts
    if "runtime_sha256" not in facts:  # a build journaled by an older cycle
        return None
    try:
        network_sha256 = sha256_file(network)
    except OSError:
        return None  # the renderer says what is wrong with it
    return render_cache.RenderInputs(
        network_sha256=network_sha256,
        node_binary_sha256=facts["binary_sha256"],
        # The devnode artifact is a launcher: its code is named by a digest of its source.
        node_version=(
            f"{facts.get('node_version')}; {devnode_source_digest()}"
            if facts.get("devnode")
            else facts.get("node_version")
        ),
        runtime_sha256=facts["runtime_sha256"],
        revision=facts["revision"],
        renderer=render_cache.renderer_version(),
    )


def probe_public(url: str, tries: int, interval_s: float) -> tuple[str | None, list[str]]:
    """The genesis the public endpoint serves, asked up to ``tries`` times ``interval_s`` apart
    until it answers; with what each probe saw."""
    client = RpcClient(url, timeout=RPC_TIMEOUT_S)
    probes: list[str] = []
    for attempt in range(1, tries + 1):
        if attempt > 1:
            time.sleep(interval_s)
        try:
            genesis = client.genesis_hash()
        except RpcError as exc:
            probes.append(f"probe {attempt}: no answer ({exc})")
            continue
        probes.append(f"probe {attempt}: {genesis}")
        return genesis, probes
    return None, probes


def compare(ctx: CycleContext) -> str:
    url = ctx.public_url()

    def served_genesis(node: Node) -> str | None:
        result = ctx.node_rpc(node, "chain_getBlockHash", [0])
        return str(result) if result else None

    # Local nodes and the public endpoint are asked at once from threads; remote nodes go
    # through the pyinfra session meanwhile, from this thread only. The public endpoint's
    # further probes (when it does not answer) overlap the nodes' questions too.
    local = [n for n in ctx.nodes if ctx.on_this_machine(n.host)]
    with ThreadPoolExecutor(max_workers=1 + len(local)) as pool:
        public_future = pool.submit(probe_public, url, PUBLIC_PROBES, PUBLIC_PROBE_INTERVAL_S)
        futures = {n.host: pool.submit(served_genesis, n) for n in local}
        remote = {n.host: served_genesis(n) for n in ctx.nodes if n.host not in futures}
        public, probes = public_future.result()
        asked = {host: f.result() for host, f in futures.items()} | remote
    served = {n.host: asked[n.host] for n in ctx.nodes}
    deployed = {n.host: n.manifest.get("genesis_hash") for n in ctx.nodes}
    ctx.facts.update(public_genesis=public, public_probes=probes, node_genesis=served,
                     deployed_genesis=deployed)
    return f"public {public}; " + ", ".join(
        f"{h} serves {served[h]}, deployed {deployed[h]}" for h in served)


def decision(ctx: CycleContext) -> str:
    facts = ctx.facts
    d: Decision = decide(
        Observed(
            expected_genesis=facts["expected_genesis"],
            expected_binary_sha256=facts["binary_sha256"],
            public_genesis=facts["public_genesis"],
            node_genesis=facts["node_genesis"],
            deployed_genesis=facts["deployed_genesis"],
            deployed_binary_sha256={
                n.host: (n.manifest.get("binary") or {}).get("sha256") for n in ctx.nodes
            },
            force_reset=ctx.opts.force_reset,
        )
    )
    facts.update(action=d.action.value, reason=d.reason, down=d.down)
    return f"{d.action.value}: {d.reason}"

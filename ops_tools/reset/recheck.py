"""Verify before skip: what a resumed cycle checks before it skips a phase its journal marks done.

A journal says what was attempted; the world says what is true. Each phase done earlier is
either checked against the hosts (its result still there: skipped; gone: done again, with the
reason), run again because running it is itself the check (waits, pre-flight, idempotent
convergence), or kept because it records the attempt being resumed (the decision) or its result
is converged again by a later phase.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ops_tools.checksums import sha256_file
from ops_tools.reset.context import CycleContext
from ops_tools.reset.nodes import HostOpFailed, Node
from ops_tools.reset.phases import Phase

# (holds, what was seen): holds means the phase's result is still there and it is skipped.
Check = tuple[bool, str]

RERUN = frozenset({
    Phase.RENDER,  # the render cache checks its files and reuses them
    # stage-nodes pushes and checks again: a later reset-* phase redone takes the staged files
    Phase.PREFLIGHT, Phase.STAGE_NODES, Phase.WAIT_FINALITY, Phase.VERIFY, Phase.REPAIR_EDGE,
    Phase.REPAIR_NODES, Phase.PUBLISH, Phase.SERVICES, Phase.ROLL_BINARY,
})
KEPT = {
    Phase.COMPARE: "the observation the resumed decision was taken on",
    Phase.DECIDE: "the decision being resumed",
    Phase.STOP_SERVICES: "the services phase starts the declared services again",
    Phase.STAGE_SERVICES: "the services phase converges the services again",
    Phase.RESTART_SERVICES: "the services phase converges the services again",
}


def _build(ctx: CycleContext) -> Check:
    f = ctx.facts
    for what, path, want in (("node binary", f.get("node_binary"), f.get("binary_sha256")),
                             ("runtime", f.get("runtime"), f.get("runtime_sha256"))):
        if not path or not Path(path).is_file():
            return False, f"the built {what} {path} is gone"
        if sha256_file(Path(path)) != want:
            return False, f"the built {what} {path} no longer has sha256 {want}"
    return True, f"artifact of {str(f.get('revision'))[:12]} intact"


def _served(ctx: CycleContext, node: Node) -> str | None:
    genesis = ctx.node_rpc(node, "chain_getBlockHash", [0])
    return str(genesis) if genesis else None


def _stopped(ctx: CycleContext) -> Check:
    expected = ctx.facts["expected_genesis"]
    running = [f"{n.host} serves {g}" for n in ctx.nodes
               if (g := _served(ctx, n)) is not None and g != expected]
    if running:
        return False, f"{'; '.join(running)}: running on the old chain again"
    return True, "every node is stopped or serves the new genesis"


def _pushed(roles: tuple[str, ...]) -> Callable[[CycleContext], Check]:
    def check(ctx: CycleContext) -> Check:
        spec = Path(ctx.facts["render_dir"]) / "raw.json"
        want = {"binary": ctx.facts["binary_sha256"],
                "spec": sha256_file(spec) if spec.is_file() else None}
        for n in ctx.of_role(*roles):
            for what, path in (("binary", n.manifest["binary"]["path"]),
                               ("spec", n.manifest["chainspec_path"])):
                try:
                    got = ctx.machines.sha256(n.host, path)
                except HostOpFailed:
                    got = None
                if got != want[what]:
                    return False, f"{n.host}: {what} {path} is not the pushed one ({got})"
        return True, "binary and spec in place on " + ", ".join(
            n.host for n in ctx.of_role(*roles))
    return check


def _started(roles: tuple[str, ...]) -> Callable[[CycleContext], Check]:
    def check(ctx: CycleContext) -> Check:
        expected = ctx.facts["expected_genesis"]
        for n in ctx.of_role(*roles):
            served = _served(ctx, n)
            if served != expected:
                return False, f"{n.host} serves {served or 'nothing'}, not {expected}"
        return True, f"{', '.join(n.host for n in ctx.of_role(*roles))} serve {expected}"
    return check


def _recorded(ctx: CycleContext) -> Check:
    expected = ctx.facts["expected_genesis"]
    for n in ctx.nodes:
        recorded = (ctx.read_manifest(n.host) or {}).get("genesis_hash")
        if recorded != expected:
            return False, f"{n.host}'s manifest records {recorded}, not {expected}"
    return True, f"every host manifest records {expected}"


CHECKS: dict[Phase, Callable[[CycleContext], Check]] = {
    Phase.BUILD: _build,
    Phase.STOP_NODES: _stopped,
    Phase.RESET_AUTHORITIES: _pushed(("authority",)),
    Phase.START_AUTHORITIES: _started(("authority",)),
    Phase.RESET_RPC: _pushed(("rpc", "full")),
    Phase.START_RPC: _started(("rpc", "full")),
    Phase.RECORD: _recorded,
}


def recheck(phase: Phase, ctx: CycleContext) -> Check:
    """Whether a phase the journal marks done may be skipped, and why (or why it runs again)."""
    if phase in KEPT:
        return True, f"kept: {KEPT[phase]}"
    if phase in CHECKS:
        holds, seen = CHECKS[phase](ctx)
        return holds, f"checked: {seen}" if holds else seen
    if phase in RERUN:
        return False, "run again: running it is its own check"
    raise AssertionError(f"phase {phase} has no resume rule")

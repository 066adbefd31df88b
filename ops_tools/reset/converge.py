"""The phases that hand the new network to the roles: the platform services, the docs site's
release, the host manifests (``record``), and a same-genesis binary roll.

Each runs a playbook with the cycle's render and binary; the roles own the hosts' configuration,
so a service that joins the inventory's ``services`` group is restarted on the new chain without
a change here.
"""

from __future__ import annotations

import shlex
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ops_tools.deploy.paths import PLAYBOOKS, localnet_dir
from ops_tools.programs import Program
from ops_tools.reset.context import CycleContext, CycleFailed
from ops_tools.reset.nodes import HostOpFailed
from ops_tools.reset.phases import Phase
from ops_tools.reset.shell import all_at_once, in_order


def stage_services(ctx: CycleContext) -> str:
    # Each service's configuration names the genesis it serves. The services play writes it for
    # the new render now, while the services still serve the old network (a running process
    # does not read its files again), and leaves each restart to restart-services: the Ansible
    # run is then outside the downtime, and the restarts themselves take a second.
    if not ctx.inventory.hosts("services"):
        return "no platform services in the inventory"
    from ops_tools.deploy.runner import run_playbook

    extra = {**ctx.playbook_extravars(), "service_defer_restart": True}
    result = run_playbook(PLAYBOOKS / "services.yml", ctx.opts.inventory, extra)
    ctx.facts["pending_services"] = result.pending_starts
    staged = sum(len(p) for p in result.pending_starts.values())
    return f"{staged} service(s) staged for a restart ({result.changed} change(s))"


def restart_command(pending: dict[str, Any]) -> str:
    """The shell command that restarts a staged service and then promotes its manifest (what
    net_service_converge writes after a start of its own)."""
    staged = shlex.quote(pending["pending"])
    # Already promoted when a killed cycle is resumed here: the restart is then only repeated.
    promote = f"{{ test ! -e {staged} || mv -f {staged} {shlex.quote(pending['manifest'])}; }}"
    return f"{{ {Program.of(pending).apply(bool(pending['reload']))}; }} && {promote}"


def restart_services(ctx: CycleContext) -> str:
    # The staged services restart at once, all of them together: each comes up not ready
    # (naming both hashes) until the RPC node serves its genesis, then ready. The RPC and full
    # nodes (stop-nodes' first step) stop meanwhile, and this phase waits for their stop alone.
    # A cycle resumed without a staged run (or one that staged nothing) converges the services
    # play in the background instead; the services phase waits for it.
    if not ctx.inventory.hosts("services"):
        return "no platform services in the inventory"
    staged = ctx.facts.get("pending_services")
    if staged:
        public = ctx.of_role("rpc", "full")
        # The authorities stop in this batch too where the order (public nodes first) holds
        # inside one machine's command: every RPC and full node is on their machine (the local
        # network). Their shutdown then overlaps the restarts; elsewhere stop-nodes stops them.
        authorities = ctx.of_role("authority")
        if authorities:
            machine = ctx.machines.machine_of
            public_on = {machine[n.host] for n in public}
            authorities = [n for n in authorities if public_on <= {machine[n.host]}]
        commands: dict[str, list[str]] = {}
        if public and authorities:
            commands[public[0].host] = [in_order([
                all_at_once([n.stop_command() for n in public]),
                all_at_once([n.stop_command() for n in authorities])])]
        else:
            for n in [*public, *authorities]:
                commands.setdefault(n.host, []).append(n.stop_command())
        # The restarts go from a thread of their own (over the remote machines' connections,
        # as child processes on this one) and are awaited by the services phase: each service
        # comes up not ready until the new chain is served anyway, so its graceful stop and
        # start-up (seconds) need not hold the window; this phase waits for the nodes' stop
        # alone.
        later = {host: [restart_command(p) for p in ps] for host, ps in staged.items()}
        ctx.background.restarts = ctx.machines.run_later(
            "restart the staged services", later, parallel=True)
        stopped = [n.host for n in [*public, *authorities]]
        if commands:
            ctx.machines.run(f"stop {', '.join(stopped)}", commands, parallel=True)
        ctx.facts["stopped_with_services"] = stopped
        names = ", ".join(sorted(p["name"] for ps in staged.values() for p in ps))
        with_them = f"; stopped {', '.join(stopped)} with them" if stopped else ""
        return f"restarted {names} (awaited by the services phase){with_them}"
    if staged is not None:
        return "no service needed a restart"
    from ops_tools.deploy.runner import run_playbook

    # Long enough to outlast the network's own waits (wait-finality and verify each have
    # timeout_s): the run's readiness waits end when the new chain is served.
    extra = {**ctx.playbook_extravars(), "service_ready_timeout": int(3 * ctx.opts.timeout_s)}
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="services-yml")
    ctx.background.run = pool.submit(
        run_playbook, PLAYBOOKS / "services.yml", ctx.opts.inventory, extra,
        cancel=ctx.background.cancel,
    )
    pool.shutdown(wait=False)
    return "services.yml started with the new render (in the background)"


def services(ctx: CycleContext) -> str:
    # The declared hooks (net_services) run their after-reset actions; then restart-services'
    # run is awaited: its plays end when every service is ready on the new genesis. A resumed
    # cycle has no such run (it died with the killed one) and converges them here.
    from ops_tools.deploy.runner import run_playbook

    if ctx.background.restarts is not None:
        restarts, ctx.background.restarts = ctx.background.restarts, None
        try:
            _, step = restarts.result()
        except HostOpFailed as exc:
            raise CycleFailed(f"the staged services' restart failed: {exc}") from None
        if step is not None:  # filed under the phase that sent it, where it began
            what, started, seconds = step
            ctx.facts.setdefault("timings", []).append(
                [Phase.RESTART_SERVICES.value, f"{what} (not awaited there)",
                 round(started, 3), round(seconds, 3)])
    ctx.machines.run("services after reset", {h.host: h.after_reset() for h in ctx.hooks})
    hooks = ", ".join(f"{h.name}: {h.action}" for h in ctx.hooks)
    if ctx.background.run is not None:
        result = ctx.background.run.result()
    elif ctx.inventory.hosts("services"):
        result = run_playbook(PLAYBOOKS / "services.yml", ctx.opts.inventory,
                              ctx.playbook_extravars())
    else:
        return hooks or "no services in the inventory"
    return "; ".join(filter(None, [
        hooks, f"services.yml: {result.changed} change(s), every service ready"]))


def publish(ctx: CycleContext) -> str:
    # The docs role publishes the render the network now serves (the previous release is
    # listed as replaced) and serves the rebuilt site; publishing it again changes nothing.
    docs_hosts = ctx.inventory.hosts("docs")
    if not docs_hosts:
        return "no docs host in the inventory"
    kind = "devnode" if ctx.facts.get("devnode") else "substrate"
    if ctx.localnet and all(ctx.inventory.hostvars[h].get("docs_site_on_controller")
                            for h in docs_hosts):
        return _publish_in_place(ctx, docs_hosts, kind)
    from ops_tools.deploy.runner import run_playbook

    extra = {**ctx.playbook_extravars(), "docs_release_node_kind": kind}
    result = run_playbook(PLAYBOOKS / "docs.yml", ctx.opts.inventory, extra)
    return (
        f"release {ctx.facts['expected_genesis']} published on {', '.join(docs_hosts)}"
        f" ({result.changed} change(s))"
    )


def _publish_in_place(ctx: CycleContext, hosts: list[str], kind: str) -> str:
    # The local network's nginx serves the controller's build in place: the role's own call,
    # made here without an ansible-playbook start (seconds), and served as soon as it returns.
    # The layout is the local inventory's (docs_controller_dir: <localnet>/<host>, with the
    # role's releases/ and site/ under it); record's run of the role then finds it up to date.
    from ops_tools.docsite.publish import Release, publish_site

    endpoints = ctx.var("net_public_endpoints") or {}
    release = Release(Path(ctx.facts["render_dir"]), kind,
                      None if kind == "devnode" else Path(ctx.facts["node_binary"]))
    for host in hosts:
        root = localnet_dir() / host
        publish_site(root / "releases", root / "site", endpoints, release)
    return f"release {ctx.facts['expected_genesis']} published in place on {', '.join(hosts)}"


# What record converges: the controller's pre-flight and the nodes. The services were converged
# with the same inputs by the services phase and the docs site by publish (with the release's
# node kind, which the inventory's may not be); the edge does not depend on the genesis. Running
# them again here only repeated that (on the testnet shape, two thirds of record's time).
RECORD_LIMIT = "localhost:authorities:rpc_nodes"


def record(ctx: CycleContext) -> str:
    # The roles own the hosts' configuration: re-converging with the new inputs rewrites the
    # host manifests. Binary and spec are already in place and the chain data was purged by
    # this cycle, so the role must not purge (and restart) the new chain again.
    from ops_tools.deploy.runner import run_playbook
    from ops_tools.reset.network import drop_staged

    drop_staged(ctx)
    extra = {**ctx.playbook_extravars(), "node_purge_on_genesis_change": False}
    result = run_playbook(PLAYBOOKS / "site.yml", ctx.opts.inventory, extra,
                          limit=RECORD_LIMIT)
    return (f"site.yml converged the nodes ({result.changed} change(s)); host manifests record"
            " the new chain")


def roll_binary(ctx: CycleContext) -> str:
    from ops_tools.deploy.runner import run_playbook

    result = run_playbook(PLAYBOOKS / "site.yml", ctx.opts.inventory, ctx.playbook_extravars())
    return f"site.yml rolled the new binary ({result.changed} change(s))"

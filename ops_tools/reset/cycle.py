"""The reset-cycle state machine: inspect, decide, then (when needed) reset the network.

Every phase is journaled before and after it runs; ``--resume`` skips the phases the journal
records as done, so each phase must be safe to run again (stop a stopped node, purge a purged
base path, push a file that is already there, start a started node).

The no-change decision is the common case (a timer runs the cycle on every pallet-suite commit),
so the inspection phases stay cheap: the heavy modules (pyinfra, ansible-runner, the renderer)
are imported only on the paths that use them, nodes on this machine are read and asked
directly (no pyinfra session), the RPC questions of the compare phase go out in parallel, and a
render already done for the same inputs is reused once it checks out (``render_cache``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ops_tools.build.devnode_probe import devnode_version, find_devnode
from ops_tools.chain.rpc import RpcClient, RpcError
from ops_tools.chain.status import WaitTimeout, wait_finality_advances, wait_for, wait_serving
from ops_tools.chainspec import render_cache
from ops_tools.checksums import sha256_file
from ops_tools.deploy.inventory import Inventory, load_inventory
from ops_tools.deploy.paths import INVENTORIES, NETWORKS, PLAYBOOKS, PROJECT_ROOT, localnet_dir
from ops_tools.errors import InputError, OpsError
from ops_tools.reset.decide import Action, Decision, Observed, decide
from ops_tools.reset.hooks import ServiceHook, load_hooks
from ops_tools.reset.journal import Journal
from ops_tools.reset.lock import cycle_lock
from ops_tools.reset.nodes import HostOpFailed, Node, is_local
from ops_tools.reset.phases import DESTRUCTIVE, INSPECT, RESET, ROLL, Phase
from ops_tools.sources import devnode_source_digest

if TYPE_CHECKING:
    from ops_tools.deploy.runner import PlaybookResult
    from ops_tools.reset.hostops import Machines

MIN_FREE_BYTES = 512 * 1024 * 1024
# Seconds for one JSON-RPC question to a node or the public endpoint (as curl's --max-time on
# remote hosts). The questions go out in parallel, so this bounds the compare phase as a whole.
RPC_TIMEOUT_S = 5.0


class CycleFailed(OpsError):
    pass


@dataclass
class Options:
    inventory: Path
    repo: str
    ref: str
    dry_run: bool = False
    yes: bool = False
    resume: bool = False
    timeout_s: float = 120.0
    build_cache: Path | None = None
    on_step: Callable[[str], None] = lambda _: None
    confirm: Callable[[str], bool] = lambda _: False


@dataclass
class Report:
    cycle_id: str | None
    decision: str
    reason: str
    revision: str | None
    expected_genesis: str | None
    plan: list[str]
    phases: list[dict[str, Any]] = field(default_factory=list)
    downtime_s: float | None = None
    total_s: float | None = None
    journal: str | None = None
    dry_run: bool = False


def state_root() -> Path:
    env = os.environ.get("NET_OPS_STATE")
    return Path(env).expanduser() if env else Path.home() / ".local" / "state" / "net-ops"


def cycle_dir(inventory: Path) -> Path:
    resolved = inventory.resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:8]
    return state_root() / "reset" / f"{resolved.name}-{digest}"


def _devnode_version() -> str:
    return devnode_version(find_devnode())


class ResetCycle:
    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.dir = cycle_dir(opts.inventory)
        self.inventory: Inventory = load_inventory(opts.inventory)
        self.is_local = opts.inventory.resolve() == (INVENTORIES / "local").resolve()
        self.nodes: list[Node] = []
        self.hooks: list[ServiceHook] = []
        self._machines: Machines | None = None
        self.journal: Journal | None = None
        self.facts: dict[str, Any] = {}
        # services.yml running in the background from restart-services until services joins it.
        self._services_run: Future[PlaybookResult] | None = None
        self._services_cancel = threading.Event()

    # ---- inventory-derived settings -------------------------------------------------------
    def _var(self, name: str, default: Any = None) -> Any:
        for host in self.inventory.hosts():
            value = self.inventory.hostvars[host].get(name)
            if value is not None and "{{" not in str(value):
                return value
        return default

    def _network_file(self) -> Path:
        declared = self._var("net_network_definition")
        if declared:
            path = Path(declared)
            return path if path.is_absolute() else PROJECT_ROOT / path
        return NETWORKS / f"{self.opts.inventory.resolve().name}.yml"

    def _public_url(self) -> str:
        url = self._var("net_public_rpc_url")
        if url:
            return str(url)
        rpc_hosts = self.inventory.hosts("rpc_nodes")
        if self.is_local and rpc_hosts:
            port = self.inventory.hostvars[rpc_hosts[0]].get("node_rpc_port", 9944)
            return f"http://127.0.0.1:{port}"
        raise InputError(
            f"inventory {self.opts.inventory}: set net_public_rpc_url (the public RPC endpoint)"
        )

    def _manifest_path(self, host: str) -> str:
        hv = self.inventory.hostvars[host]
        root = hv.get("node_root_dir")
        if self.is_local:
            root = str(localnet_dir() / host)
        elif not root or "{{" in str(root):
            root = f"/var/lib/net/{hv.get('node_name', host)}"
        return f"{root}/deployed.json"

    def _node_hosts(self) -> list[str]:
        return [h for h in self.inventory.hosts() if self.inventory.role_of(h) != "other"]

    def _on_this_machine(self, host: str) -> bool:
        return is_local(self.inventory.hostvars.get(host, {}), host)

    # ---- reaching the hosts ----------------------------------------------------------------
    @property
    def machines(self) -> Machines:
        """The pyinfra session, opened on first use: a decision on local hosts never needs it."""
        if self._machines is None:
            from ops_tools.reset.hostops import Machines

            self._machines = Machines(self.inventory, self._node_hosts())
        return self._machines

    def _close_machines(self) -> None:
        if self._machines is not None:
            machines, self._machines = self._machines, None
            machines.__exit__(None, None, None)

    def _read_manifest(self, host: str) -> dict[str, Any] | None:
        path = self._manifest_path(host)
        if not self._on_this_machine(host):
            return self.machines.read_json(host, path)
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def _node_rpc(self, node: Node, method: str, params: list[Any] | None = None) -> Any:
        """JSON-RPC on the node's own loopback (authorities expose RPC nowhere else); None when
        the node does not answer."""
        if not self._on_this_machine(node.host):
            return self.machines.rpc(node.host, node.rpc_port, method, params)
        client = RpcClient(f"http://127.0.0.1:{node.rpc_port}", timeout=RPC_TIMEOUT_S)
        try:
            return client.call(method, params)
        except RpcError:
            return None

    # ---- running ---------------------------------------------------------------------------
    def run(self) -> Report:
        o = self.opts
        if o.dry_run and not o.resume:
            return self._run_locked(None)  # a dry run writes no journal and takes no lock
        path = self.dir / "journal.json"
        # The lock comes before the journal is touched: a refused second cycle must not
        # overwrite the journal of the one that holds it.
        cycle_id = Journal.load(path).cycle_id if o.resume else uuid.uuid4().hex[:12]
        with cycle_lock(self.dir / "lock", cycle_id):
            if o.resume:
                journal = Journal.load(path)
                if journal.status == "completed":
                    raise InputError(
                        f"the last cycle ({journal.cycle_id}) completed; nothing to resume"
                    )
                o.repo, o.ref = journal.repo, journal.ref
                journal.mark_interrupted()
            else:
                journal = Journal.new(path, cycle_id, str(o.inventory), o.repo, o.ref)
            return self._run_locked(journal)

    def _run_locked(self, journal: Journal | None) -> Report:
        self.journal = journal
        if journal is not None:
            self.facts = journal.facts
            journal.status, journal.error = "running", None
            journal.save()
        started = time.monotonic()
        hosts = self._node_hosts()
        if not hosts:
            raise InputError(f"inventory {self.opts.inventory}: no authorities or rpc_nodes hosts")
        self.hooks = load_hooks(self._var("net_services"), set(self.inventory.hosts()))
        try:
            self._load_nodes(hosts)
            for phase in INSPECT:
                self._phase(phase)
            decision = Decision(Action(self.facts["action"]), self.facts["reason"])
            plan = {Action.NOTHING: [], Action.ROLL_BINARY: ROLL, Action.RESET: RESET}[
                decision.action
            ]
            if self.opts.dry_run or not plan:
                if journal is not None:
                    journal.status = "completed"
                    journal.save()
                return self._report(decision, plan, started)
            self._confirm(decision, plan)
            for phase in plan:
                self._phase(phase)
        finally:
            self._stop_background()
            self._close_machines()
        if journal is not None:
            journal.status = "completed"
            journal.save()
        return self._report(decision, plan, started)

    def _report(self, decision: Decision, plan: list[Phase], started: float) -> Report:
        downtime = None
        if "downtime_from" in self.facts and "downtime_to" in self.facts:
            downtime = self.facts["downtime_to"] - self.facts["downtime_from"]
        phases = [
            {
                "name": p.name,
                "status": p.status,
                "seconds": round((p.finished or time.time()) - p.started, 2),
                "detail": p.detail,
            }
            for p in (self.journal.phases if self.journal else [])
        ]
        return Report(
            cycle_id=self.journal.cycle_id if self.journal else None,
            decision=decision.action.value,
            reason=decision.reason,
            revision=self.facts.get("revision"),
            expected_genesis=self.facts.get("expected_genesis"),
            plan=[p.value for p in plan],
            phases=phases,
            downtime_s=round(downtime, 2) if downtime is not None else None,
            total_s=round(time.monotonic() - started, 2),
            journal=str(self.journal.path) if self.journal else None,
            dry_run=self.opts.dry_run,
        )

    def _confirm(self, decision: Decision, plan: list[Phase]) -> None:
        if self.opts.yes:
            return
        hosts = ", ".join(n.host for n in self.nodes)
        text = (
            f"{decision.reason}.\nThis will {decision.action.value} the network of"
            f" {self.opts.inventory} ({hosts}): phases {', '.join(p.value for p in plan)}."
            " Chain data is purged; keystores and node keys are kept."
        )
        if not self.opts.confirm(text):
            raise CycleFailed("not confirmed; nothing was changed (pass --yes to run unattended)")

    def _phase(self, phase: Phase) -> None:
        journal = self.journal
        if journal is not None and journal.done(phase.value):
            return
        if self.opts.dry_run and phase in DESTRUCTIVE:
            raise AssertionError(f"dry run reached destructive phase {phase}")
        self.opts.on_step(phase.value)
        record = journal.begin(phase.value) if journal else None
        try:
            detail = getattr(self, "_" + phase.value.replace("-", "_"))()
        except (OpsError, HostOpFailed) as exc:
            if journal is not None and record is not None:
                journal.fail(record, str(exc))
            where = f" (journal: {journal.path})" if journal else ""
            raise CycleFailed(f"phase {phase.value} failed: {exc}{where}") from None
        except BaseException as exc:
            if journal is not None and record is not None:
                journal.fail(record, f"interrupted: {type(exc).__name__}")
            raise
        if journal is not None and record is not None:
            journal.finish(record, detail or "")

    def _load_nodes(self, hosts: list[str]) -> None:
        self.nodes = []
        for host in hosts:
            manifest = self._read_manifest(host)
            if manifest is None:
                raise CycleFailed(
                    f"{host}: no host manifest at {self._manifest_path(host)}; deploy it with"
                    " playbooks/site.yml first (a reset cycle only resets what is deployed)"
                )
            self.nodes.append(
                Node(host, manifest.get("role") or self.inventory.role_of(host), manifest)
            )

    def _of_role(self, *roles: str) -> list[Node]:
        return [n for n in self.nodes if n.role in roles]

    # ---- inspection phases ----------------------------------------------------------------
    def _build(self) -> str:
        devnode = (
            self._var("net_node_kind") or ("devnode" if self.is_local else "substrate")
        ) == "devnode"
        with ThreadPoolExecutor(max_workers=1) as pool:
            # `devnode --version` (a Python process) runs while this one loads the build code
            # and resolves the ref: both take a few tenths of a second.
            version = pool.submit(_devnode_version) if devnode else None
            from ops_tools.build.builder import BuildRequest, build
            from ops_tools.build.devnode_artifact import make_devnode_artifact

            result = build(
                BuildRequest(repo=self.opts.repo, ref=self.opts.ref, cache=self.opts.build_cache)
            )
            artifact = result.artifact
            if version is not None:
                artifact = make_devnode_artifact(
                    artifact.directory, cache=self.opts.build_cache, version=version.result()
                )
        self.facts.update(
            revision=result.artifact.manifest["revision"],
            artifact_dir=str(artifact.directory),
            node_binary=str(artifact.node_binary),
            runtime=str(artifact.runtime),
            binary_sha256=sha256_file(artifact.node_binary),
            runtime_sha256=sha256_file(artifact.runtime),
            node_version=artifact.manifest.get("node_version"),
            devnode=devnode,
        )
        if devnode and not all(self._on_this_machine(h) for h in self._node_hosts()):
            # The artifact's binary is a launcher for this machine's devnode, which a remote
            # host does not have: remote hosts run the development node as one file.
            bundle = self._devnode_bundle(version.result() if version else "")
            self.facts.update(
                node_binary=str(bundle),
                binary_sha256=sha256_file(bundle),
            )
        hit = "cache hit" if result.cache_hit else "built"
        return f"{self.facts['revision'][:12]} ({hit})"

    def _devnode_bundle(self, version: str) -> Path:
        """The development-node bundle (docs/build.md), kept per source and version: the same
        sources give the same bytes, so a no-change cycle finds the same binary deployed."""
        from ops_tools.build.devnode_bundle import build_devnode_bundle

        key = hashlib.sha256(
            f"{version}; {devnode_source_digest()}; {render_cache.renderer_version()}".encode()
        ).hexdigest()[:16]
        path = self.dir / "devnode-bundle" / key / "net-node"
        if not path.is_file():
            build_devnode_bundle(path)
        return path

    def _render(self) -> str:
        network = self._network_file()
        out = self.dir / "render" / self.facts["revision"]
        genesis, reused = render_cache.render_cached(
            out,
            self._render_inputs(network),
            network,
            Path(self.facts["node_binary"]),
            Path(self.facts["runtime"]),
            pallet_suite_revision=self.facts["revision"],
        )
        self.facts.update(render_dir=str(out), expected_genesis=genesis)
        return f"{genesis} (render reused: same inputs, checked)" if reused else genesis

    def _render_inputs(self, network: Path) -> render_cache.RenderInputs | None:
        if "runtime_sha256" not in self.facts:  # a build journaled by an older cycle
            return None
        try:
            network_sha256 = sha256_file(network)
        except OSError:
            return None  # the renderer says what is wrong with it
        return render_cache.RenderInputs(
            network_sha256=network_sha256,
            node_binary_sha256=self.facts["binary_sha256"],
            # The devnode artifact is a launcher: its code is named by a digest of its source.
            node_version=(
                f"{self.facts.get('node_version')}; {devnode_source_digest()}"
                if self.facts.get("devnode")
                else self.facts.get("node_version")
            ),
            runtime_sha256=self.facts["runtime_sha256"],
            revision=self.facts["revision"],
            renderer=render_cache.renderer_version(),
        )

    def _compare(self) -> str:
        url = self._public_url()

        def public_genesis() -> str | None:
            try:
                return RpcClient(url, timeout=RPC_TIMEOUT_S).genesis_hash()
            except RpcError:
                return None

        # Local nodes and the public endpoint are asked at once from threads; remote nodes go
        # through the pyinfra session meanwhile, from this thread only.
        local = [n for n in self.nodes if self._on_this_machine(n.host)]
        with ThreadPoolExecutor(max_workers=1 + len(local)) as pool:
            public_future = pool.submit(public_genesis)
            futures = {n.host: pool.submit(self._served_genesis, n) for n in local}
            remote = {n.host: self._served_genesis(n) for n in self.nodes if n.host not in futures}
            public = public_future.result()
            asked = {host: f.result() for host, f in futures.items()} | remote
        served = {n.host: asked[n.host] for n in self.nodes}
        self.facts.update(public_genesis=public, node_genesis=served)
        return f"public {public}; " + ", ".join(f"{h} {g}" for h, g in served.items())

    def _served_genesis(self, node: Node) -> str | None:
        result = self._node_rpc(node, "chain_getBlockHash", [0])
        return str(result) if result else None

    def _decide(self) -> str:
        d = decide(
            Observed(
                expected_genesis=self.facts["expected_genesis"],
                expected_binary_sha256=self.facts["binary_sha256"],
                public_genesis=self.facts["public_genesis"],
                node_genesis=self.facts["node_genesis"],
                deployed_binary_sha256={
                    n.host: (n.manifest.get("binary") or {}).get("sha256") for n in self.nodes
                },
            )
        )
        self.facts.update(action=d.action.value, reason=d.reason)
        return f"{d.action.value}: {d.reason}"

    # ---- acting phases -------------------------------------------------------------------
    def _preflight(self) -> str:
        deployed = {n.manifest.get("genesis_hash") for n in self.nodes}
        if len(deployed) != 1:
            raise CycleFailed(f"the host manifests disagree on the deployed genesis: {deployed}")
        (deployed_genesis,) = deployed
        live = self.facts.get("public_genesis")
        if live is not None and live != deployed_genesis:
            raise CycleFailed(
                f"the live network at {self._public_url()} serves genesis {live}, but the"
                f" inventory's manifests say {deployed_genesis} is deployed there (wrong"
                " inventory or endpoint?); refusing to touch it"
            )
        for node in self.nodes:
            served = self.facts["node_genesis"].get(node.host)
            if served is not None and served != deployed_genesis:
                raise CycleFailed(
                    f"{node.host} serves genesis {served}, its manifest says {deployed_genesis};"
                    " refusing to touch it"
                )
            free = self.machines.free_bytes(node.host, node.manifest["base_path"])
            if free < MIN_FREE_BYTES:
                raise CycleFailed(
                    f"{node.host}: only {free // 2**20} MiB free at {node.manifest['base_path']};"
                    f" a reset needs {MIN_FREE_BYTES // 2**20} MiB"
                )
        return f"{len(self.nodes)} node(s) reachable, identity {deployed_genesis}"

    def _stop_services(self) -> str:
        self.facts.setdefault("downtime_from", time.time())
        self.machines.run("stop services", {h.host: [h.stop] for h in self.hooks})
        return ", ".join(h.name for h in self.hooks) or "no services declared"

    def _stop_nodes(self) -> str:
        order = self._of_role("rpc", "full") + self._of_role("authority")
        for node in order:  # public endpoint first, authorities last
            self.machines.run(f"stop {node.host}", {node.host: [node.stop_command()]})
        return ", ".join(n.host for n in order)

    def _reset_nodes(self, nodes: list[Node]) -> str:
        self.machines.run("purge chain data", {n.host: [n.purge_command()] for n in nodes})
        binary, spec = Path(self.facts["node_binary"]), Path(self.facts["render_dir"]) / "raw.json"
        self.machines.put(
            "push binary and spec",
            {
                n.host: [
                    (binary, n.manifest["binary"]["path"], "755"),
                    (spec, n.manifest["chainspec_path"], "644"),
                ]
                for n in nodes
            },
        )
        want = {
            "binary": self.facts["binary_sha256"],
            "spec": sha256_file(spec),
        }
        for n in nodes:
            for what, path in (
                ("binary", n.manifest["binary"]["path"]),
                ("spec", n.manifest["chainspec_path"]),
            ):
                got = self.machines.output(n.host, f"sha256sum {shlex.quote(path)}").split(" ")[0]
                if got != want[what]:
                    raise CycleFailed(
                        f"{n.host}: pushed {what} {path} has sha256 {got}, expected {want[what]}"
                    )
        return ", ".join(n.host for n in nodes)

    def _reset_authorities(self) -> str:
        return self._reset_nodes(self._of_role("authority"))

    def _reset_rpc(self) -> str:
        return self._reset_nodes(self._of_role("rpc", "full"))

    def _start(self, nodes: list[Node]) -> str:
        self.machines.run("start nodes", {n.host: [n.start_command()] for n in nodes})
        return ", ".join(n.host for n in nodes)

    def _start_authorities(self) -> str:
        return self._start(self._of_role("authority"))

    def _start_rpc(self) -> str:
        return self._start(self._of_role("rpc", "full"))

    def _wait_on_host(self, node: Node, what: str, check: Callable[[], tuple[bool, str]]) -> str:
        try:
            return wait_for(f"{node.host} to {what}", check, self.opts.timeout_s)
        except WaitTimeout as exc:
            raise CycleFailed(
                f"{node.host} did not {what} ({exc}); nothing further was wiped. Fix the node,"
                " then run reset-cycle --resume"
            ) from None

    def _heights(self, node: Node) -> tuple[str | None, int | None, int | None]:
        genesis = self._node_rpc(node, "chain_getBlockHash", [0])
        header = self._node_rpc(node, "chain_getHeader")
        fin_hash = self._node_rpc(node, "chain_getFinalizedHead")
        fin = self._node_rpc(node, "chain_getHeader", [fin_hash])
        best = int(header["number"], 16) if header else None
        finalized = int(fin["number"], 16) if fin else None
        return genesis, best, finalized

    def _wait_finality(self) -> str:
        expected = self.facts["expected_genesis"]
        seen = []
        for node in self._of_role("authority"):

            def check(node: Node = node) -> tuple[bool, str]:
                genesis, best, finalized = self._heights(node)
                ok = genesis == expected and (best or 0) >= 2 and (finalized or 0) >= 1
                return ok, f"genesis {genesis}, best #{best}, finalized #{finalized}"

            seen.append(
                f"{node.host}: "
                + self._wait_on_host(node, "author blocks and finalize on the new genesis", check)
            )
        return "; ".join(seen)

    def _verify(self) -> str:
        expected = self.facts["expected_genesis"]
        for node in self.nodes:

            def check(node: Node = node) -> tuple[bool, str]:
                genesis, best, _ = self._heights(node)
                return genesis == expected and best is not None, f"genesis {genesis}, best #{best}"

            self._wait_on_host(node, f"serve genesis {expected}", check)
        url = self._public_url()
        try:
            wait_serving(url, expected, self.opts.timeout_s)
            wait_finality_advances(url, self.opts.timeout_s)
        except (WaitTimeout, RpcError) as exc:
            raise CycleFailed(
                f"the public endpoint {url} does not serve genesis {expected} with finality"
                f" advancing: {exc}"
            ) from None
        self.facts.setdefault("downtime_to", time.time())
        return f"every node and {self._public_url()} serve {expected}; finality advancing"

    def _publish(self) -> str:
        # The docs role publishes the render the network now serves (the previous release is
        # listed as replaced) and serves the rebuilt site; publishing it again changes nothing.
        docs_hosts = self.inventory.hosts("docs")
        if not docs_hosts:
            return "no docs host in the inventory"
        from ops_tools.deploy.runner import run_playbook

        extra = {
            **self._site_extravars(),
            "docs_release_node_kind": "devnode" if self.facts.get("devnode") else "substrate",
        }
        result = run_playbook(PLAYBOOKS / "docs.yml", self.opts.inventory, extra)
        return (
            f"release {self.facts['expected_genesis']} published on {', '.join(docs_hosts)}"
            f" ({result.changed} change(s))"
        )

    def _restart_services(self) -> str:
        # Each service's configuration names the genesis it serves, so re-converging the services
        # play with the new render restarts every one on the new chain. Started now, in the
        # background, the restarts overlap the network's downtime: each service is up and not
        # ready (it names both hashes) until the chain serves its genesis, then ready at once,
        # instead of starting only after verify. The services phase waits for the run.
        if not self.inventory.hosts("services"):
            return "no platform services in the inventory"
        from ops_tools.deploy.runner import run_playbook

        # Long enough to outlast the network's own waits (wait-finality and verify each have
        # timeout_s): the run's readiness waits end when the new chain is served.
        extra = {**self._site_extravars(), "service_ready_timeout": int(3 * self.opts.timeout_s)}
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="services-yml")
        self._services_run = pool.submit(
            run_playbook, PLAYBOOKS / "services.yml", self.opts.inventory, extra,
            cancel=self._services_cancel,
        )
        pool.shutdown(wait=False)
        return "services.yml started with the new render (in the background)"

    def _services(self) -> str:
        # The declared hooks (net_services) run their after-reset actions; then the platform
        # services' run of restart-services is awaited: its plays end when every service is
        # ready on the new genesis. A resumed cycle has no such run and converges them here.
        from ops_tools.deploy.runner import run_playbook

        self.machines.run("services after reset", {h.host: h.after_reset() for h in self.hooks})
        hooks = ", ".join(f"{h.name}: {h.action}" for h in self.hooks)
        if self._services_run is not None:
            result = self._services_run.result()
        elif self.inventory.hosts("services"):
            result = run_playbook(PLAYBOOKS / "services.yml", self.opts.inventory,
                                  self._site_extravars())
        else:
            return hooks or "no services in the inventory"
        return "; ".join(filter(None, [
            hooks, f"services.yml: {result.changed} change(s), every service ready"]))

    def _stop_background(self) -> None:
        """A cycle that fails or is interrupted before the services phase stops the background
        services run, instead of leaving it waiting for a chain that will not come."""
        run = self._services_run
        if run is None or run.done():
            return
        self._services_cancel.set()
        # Its failure (cancelled) is not the cycle's error, which is already on its way up.
        with contextlib.suppress(Exception):
            run.result(timeout=60)

    def _site_extravars(self) -> dict[str, Any]:
        extra: dict[str, Any] = {
            "net_chainspec_dir": self.facts["render_dir"],
            "node_binary_src": self.facts["node_binary"],
            "node_binary_sha256": self.facts["binary_sha256"],
        }
        if self.is_local:
            extra["net_state_dir"] = str(localnet_dir())
        return extra

    def _record(self) -> str:
        # The roles own the hosts' configuration: re-converging with the new inputs rewrites
        # the host manifests. Binary and spec are already in place and the chain data was purged
        # by this cycle, so the role must not purge (and restart) the new chain again.
        from ops_tools.deploy.runner import run_playbook

        extra = {**self._site_extravars(), "node_purge_on_genesis_change": False}
        result = run_playbook(PLAYBOOKS / "site.yml", self.opts.inventory, extra)
        return (
            f"site.yml converged ({result.changed} change(s)); host manifests record the new chain"
        )

    def _roll_binary(self) -> str:
        from ops_tools.deploy.runner import run_playbook

        result = run_playbook(PLAYBOOKS / "site.yml", self.opts.inventory, self._site_extravars())
        return f"site.yml rolled the new binary ({result.changed} change(s))"

"""What every phase of a reset cycle works with: the options, the inventory and what it says
about the network, the nodes as their host manifests describe them, the way to reach their
hosts, and the facts the phases hand on to each other (journaled, so a resumed cycle has them).

Where the local network differs from a remote one, the inventory says so (``net_localnet``,
``net_node_kind``, ``net_public_rpc_url``, ``ansible_connection: local``); nothing here compares
inventory paths.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from ops_tools.chain.rpc import RpcClient, RpcError
from ops_tools.chain.status import WaitTimeout, wait_for
from ops_tools.deploy.inventory import Inventory, load_inventory
from ops_tools.deploy.paths import NETWORKS, PROJECT_ROOT, localnet_dir
from ops_tools.errors import InputError, OpsError
from ops_tools.reset.hooks import ServiceHook
from ops_tools.reset.nodes import Node, is_local

if TYPE_CHECKING:
    from ops_tools.deploy.runner import PlaybookResult
    from ops_tools.reset.hostops import Machines

# Seconds for one JSON-RPC question to a node or the public endpoint (as curl's --max-time on
# remote hosts). The questions go out in parallel, so this bounds the compare phase as a whole.
RPC_TIMEOUT_S = 5.0
# A public endpoint that does not answer is asked again before anything is concluded from it:
# an edge that restarts or a DNS answer that is late is not a down network.
PUBLIC_PROBES = 3
PUBLIC_PROBE_INTERVAL_S = 1.5
# Between two polls of a node or the public endpoint inside the downtime: each poll is cheap (a
# few JSON-RPC calls, or one command over the host's open connection), and a coarser interval
# adds up to itself to every wait of the window. The waits stay bounded by --timeout.
WINDOW_POLL_S = 0.2


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
    force_reset: bool = False
    resume_interrupted: bool = False  # resume this inventory's unfinished cycle first, if any
    timeout_s: float = 120.0
    build_cache: Path | None = None
    on_step: Callable[[str], None] = lambda _: None
    confirm: Callable[[str], bool] = lambda _: False


class Facts(TypedDict, total=False):
    """What the phases learn and pass on; journaled as JSON after every phase."""

    # build
    revision: str
    artifact_dir: str
    node_binary: str
    runtime: str
    binary_sha256: str
    runtime_sha256: str
    node_version: str | None
    devnode: bool
    # render
    render_dir: str
    expected_genesis: str
    # compare, decide
    public_genesis: str | None
    public_probes: list[str]  # each probe of the public endpoint and what it answered
    node_genesis: dict[str, str | None]
    deployed_genesis: dict[str, str | None]  # per host, from its manifest
    action: str
    reason: str
    down: list[str]  # what did not answer (a repair brings it back)
    # stage-services: each service host's deferred restarts (net_service_converge's
    # pending_start)
    pending_services: dict[str, list[dict[str, Any]]]
    # restart-services: the RPC and full nodes it stopped with the restarts
    stopped_with_services: list[str]
    # stop-nodes: the nodes it stopped (an authority it left running stops in its reset's
    # command)
    stopped_nodes: list[str]
    # reset-authorities / reset-rpc: the nodes their one command per host started after the
    # purge (start-authorities / start-rpc start only the others)
    started_with_reset: list[str]
    # wait-finality: the lowest finalized height the authorities reported on the new chain
    # (verify's "finality advancing" is the public endpoint finalizing past it)
    new_finalized: int
    # What each timed step of the cycle took: [phase, step, epoch start, seconds] (the
    # downtime's breakdown is read from the ones inside the window)
    timings: list[list[Any]]
    # the network's downtime window (epoch seconds): first stop, then verified on the new chain
    downtime_from: float
    downtime_to: float


def state_root() -> Path:
    env = os.environ.get("NET_OPS_STATE")
    return Path(env).expanduser() if env else Path.home() / ".local" / "state" / "net-ops"


def cycle_dir(inventory: Path) -> Path:
    resolved = inventory.resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:8]
    return state_root() / "reset" / f"{resolved.name}-{digest}"


@dataclass
class Background:
    """A playbook run in a thread that a later phase waits for (restart-services' services.yml,
    awaited by the services phase)."""

    run: Future[PlaybookResult] | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    # restart-services' restarts of the staged services on remote machines, sent over their
    # connections while the nodes' reset goes on (awaited by the services phase).
    restarts: Future[Any] | None = None

    def stop(self) -> None:
        """A cycle that fails or is interrupted before the services phase stops the run,
        instead of leaving it waiting for a chain that will not come, and lets the restarts
        end before their connections close."""
        if self.restarts is not None:
            # Their failure is not the cycle's error, which is already on its way up.
            with contextlib.suppress(Exception):
                self.restarts.result(timeout=120)
        if self.run is None or self.run.done():
            return
        self.cancel.set()
        with contextlib.suppress(Exception):
            self.run.result(timeout=60)


@dataclass
class CycleContext:
    opts: Options
    inventory: Inventory
    dir: Path
    facts: Facts = field(default_factory=lambda: Facts())
    nodes: list[Node] = field(default_factory=list)
    hooks: list[ServiceHook] = field(default_factory=list)
    background: Background = field(default_factory=lambda: Background())
    phase: str = ""  # the phase running (what timed steps are filed under)
    _machines: Machines | None = None
    _cancel: threading.Event = field(default_factory=threading.Event)

    @classmethod
    def open(cls, opts: Options) -> CycleContext:
        return cls(opts, load_inventory(opts.inventory), cycle_dir(opts.inventory))

    # ---- what the inventory says about the network ------------------------------------------
    def var(self, name: str, default: Any = None) -> Any:
        """A network-wide inventory variable (the first host that sets it, untemplated)."""
        for host in self.inventory.hosts():
            value = self.inventory.hostvars[host].get(name)
            if value is not None and "{{" not in str(value):
                return value
        return default

    @property
    def localnet(self) -> bool:
        """The inventory is the local network: its hosts' state lives under the localnet
        directory (``NET_LOCALNET_DIR``), as ``ops-tools localnet`` keeps it."""
        return bool(self.var("net_localnet", False))

    @property
    def devnode(self) -> bool:
        return self.var("net_node_kind", "substrate") == "devnode"

    def network_file(self) -> Path:
        declared = self.var("net_network_definition")
        if declared:
            path = Path(declared)
            return path if path.is_absolute() else PROJECT_ROOT / path
        return NETWORKS / f"{self.opts.inventory.resolve().name}.yml"

    def public_url(self) -> str:
        url = self.var("net_public_rpc_url")
        if not url:
            raise InputError(
                f"inventory {self.opts.inventory}: set net_public_rpc_url (the public RPC"
                " endpoint)"
            )
        return str(url)

    def manifest_path(self, host: str) -> str:
        hv = self.inventory.hostvars[host]
        root = hv.get("node_root_dir")
        if self.localnet:
            root = str(localnet_dir() / host)
        elif not root or "{{" in str(root):
            root = f"/var/lib/net/{hv.get('node_name', host)}"
        return f"{root}/deployed.json"

    def node_hosts(self) -> list[str]:
        return [h for h in self.inventory.hosts() if self.inventory.role_of(h) != "other"]

    def on_this_machine(self, host: str) -> bool:
        return is_local(self.inventory.hostvars.get(host, {}), host)

    def playbook_extravars(self) -> dict[str, Any]:
        """What site.yml and its parts need from this cycle: the new render and binary."""
        extra = {
            "net_chainspec_dir": self.facts["render_dir"],
            "node_binary_src": self.facts["node_binary"],
            "node_binary_sha256": self.facts["binary_sha256"],
        }
        if self.localnet:
            extra["net_state_dir"] = str(localnet_dir())
        return extra

    # ---- reaching the hosts -------------------------------------------------------------------
    @property
    def machines(self) -> Machines:
        """The pyinfra session, opened on first use: a decision on local hosts never needs it."""
        if self._machines is None:
            from ops_tools.reset.hostops import Machines

            hosts = [*self.node_hosts(), *self.inventory.hosts("services"),
                     *(h.host for h in self.hooks)]
            self._machines = Machines(self.inventory, list(dict.fromkeys(hosts)))
            self._machines.on_batch = self.mark
        return self._machines

    # ---- where the time goes ------------------------------------------------------------------
    def mark(self, step: str, started: float, seconds: float) -> None:
        """File a step of the running phase that started at ``started`` (epoch) and took
        ``seconds``."""
        self.facts.setdefault("timings", []).append(
            [self.phase, step, round(started, 3), round(seconds, 3)])

    @contextlib.contextmanager
    def timed(self, step: str) -> Iterator[None]:
        started, t0 = time.time(), time.monotonic()
        try:
            yield
        finally:
            self.mark(step, started, time.monotonic() - t0)

    def close(self) -> None:
        self.background.stop()
        if self._machines is not None:
            machines, self._machines = self._machines, None
            machines.__exit__(None, None, None)

    def read_manifest(self, host: str) -> dict[str, Any] | None:
        path = self.manifest_path(host)
        if not self.on_this_machine(host):
            return self.machines.read_json(host, path)
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def load_nodes(self) -> None:
        self.nodes = []
        for host in self.node_hosts():
            manifest = self.read_manifest(host)
            if manifest is None:
                raise CycleFailed(
                    f"{host}: no host manifest at {self.manifest_path(host)}; deploy it with"
                    " playbooks/site.yml first (a reset cycle only resets what is deployed)"
                )
            self.nodes.append(
                Node(host, manifest.get("role") or self.inventory.role_of(host), manifest)
            )

    def of_role(self, *roles: str) -> list[Node]:
        return [n for n in self.nodes if n.role in roles]

    def node_rpc(self, node: Node, method: str, params: list[Any] | None = None) -> Any:
        """JSON-RPC on the node's own loopback (authorities expose RPC nowhere else); None when
        the node does not answer."""
        if not self.on_this_machine(node.host):
            return self.machines.rpc(node.host, node.rpc_port, method, params)
        client = RpcClient(f"http://127.0.0.1:{node.rpc_port}", timeout=RPC_TIMEOUT_S)
        try:
            return client.call(method, params)
        except RpcError:
            return None

    def heights(self, node: Node) -> tuple[str | None, int | None, int | None]:
        """(genesis, best, finalized) the node reports on its own loopback (None for what it
        does not answer): one command on a remote host."""
        if not self.on_this_machine(node.host):
            return self.machines.heights(node.host, node.rpc_port)
        genesis = self.node_rpc(node, "chain_getBlockHash", [0])
        if not genesis:
            return None, None, None
        header = self.node_rpc(node, "chain_getHeader")
        fin_hash = self.node_rpc(node, "chain_getFinalizedHead")
        fin = self.node_rpc(node, "chain_getHeader", [fin_hash]) if fin_hash else None
        return (str(genesis), int(header["number"], 16) if header else None,
                int(fin["number"], 16) if fin else None)

    def wait_heights(self, node: Node, what: str, genesis: str, min_best: int = 0,
                     min_finalized: int | None = None,
                     ) -> tuple[str | None, int | None, int | None]:
        """Waits until the node serves ``genesis`` with best >= ``min_best`` and finalized >=
        ``min_finalized`` (when given); returns what it served then. A remote node is waited
        for on its host, in one command (``Machines.wait_heights``); one on this machine is
        polled over HTTP."""

        def meets(h: tuple[str | None, int | None, int | None]) -> bool:
            return (h[0] == genesis and h[1] is not None and h[1] >= min_best
                    and (min_finalized is None or (h[2] or 0) >= min_finalized))

        def seen(h: tuple[str | None, int | None, int | None]) -> str:
            return f"genesis {h[0]}, best #{h[1]}, finalized #{h[2]}"

        if self.on_this_machine(node.host):
            got: list[tuple[str | None, int | None, int | None]] = []

            def check() -> tuple[bool, str]:
                h = self.heights(node)
                got.append(h)
                return meets(h), seen(h)

            self.wait_on_host(node, what, check)
            return got[-1]
        from ops_tools.reset.nodes import HostOpFailed

        try:
            with self.timed(f"wait for {node.host}"):
                met, h = self.machines.wait_heights(node.host, node.rpc_port, genesis, min_best,
                                                    min_finalized, self.opts.timeout_s)
        except (HostOpFailed, ValueError) as exc:
            met, h, last = False, (None, None, None), f"the wait failed: {exc}"
        else:
            last = seen(h)
        if not met:
            raise CycleFailed(
                f"{node.host} did not {what} (timed out after {self.opts.timeout_s:.0f} s"
                f" waiting for {node.host} to {what}; last seen: {last}); nothing further was"
                " wiped. Fix the node, then run reset-cycle --resume"
            ) from None
        return h

    def connect_for(self, nodes: list[Node]) -> None:
        """Opens the session, in this thread, before waits in threads of their own poll the
        remote ones among ``nodes`` (it is opened on first use)."""
        if any(not self.on_this_machine(n.host) for n in nodes):
            _ = self.machines

    def wait_on_hosts(self, waits: list[Callable[[], str]]) -> list[str]:
        """Each wait at once (a thread each), so that the slowest bounds them instead of their
        sum: each poll of a remote node is a command over SSH. Every wait runs to its end; the
        first failure is raised. Node polls only: pyinfra's local connector needs the main
        thread, and a node on this machine is asked over HTTP."""
        if len(waits) < 2:
            return [w() for w in waits]
        pool = ThreadPoolExecutor(max_workers=len(waits), thread_name_prefix="reset-wait")
        futures = [pool.submit(w) for w in waits]
        try:
            outcomes = [f.exception() or f.result() for f in futures]
        except BaseException:
            # Interrupted here (^C): the polls from here end at their next one, a wait on a
            # host when the cycle closes its connections, instead of running on to --timeout.
            self._cancel.set()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return [str(o) for o in outcomes]

    def wait_on_host(self, node: Node, what: str, check: Callable[[], tuple[bool, str]]) -> str:
        def poll() -> tuple[bool, str]:
            if self._cancel.is_set():
                raise CycleFailed(f"{node.host}: the wait was interrupted")
            return check()

        try:
            with self.timed(f"wait for {node.host}"):
                return wait_for(f"{node.host} to {what}", poll, self.opts.timeout_s,
                                interval_s=WINDOW_POLL_S)
        except WaitTimeout as exc:
            raise CycleFailed(
                f"{node.host} did not {what} ({exc}); nothing further was wiped. Fix the node,"
                " then run reset-cycle --resume"
            ) from None

"""The local network: every host of ``inventories/local`` on this machine, under supervisord."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ops_tools.chain.rpc import RpcClient, RpcError
from ops_tools.chain.status import wait_finality_advances, wait_serving
from ops_tools.chainspec import render_cache
from ops_tools.checksums import sha256_file
from ops_tools.deploy import converge_inputs, local_engines, port_check
from ops_tools.deploy.inventory import load_inventory
from ops_tools.deploy.manifests import (
    MANIFEST_NAME,
    SERVICE_MANIFEST_NAME,
    read_local_manifest,
)
from ops_tools.deploy.paths import (
    INVENTORIES,
    NETWORKS,
    PLAYBOOKS,
    localnet_dir,
    supervisor_conf,
)
from ops_tools.deploy.runner import PlaybookResult, run_playbook
from ops_tools.deploy.supervisor_rpc import Supervisor, SupervisorError, SupervisorUnreachable
from ops_tools.errors import InputError, OpsError
from ops_tools.sources import devnode_source_digest

LOCAL_INVENTORY = INVENTORIES / "local"
LOCAL_NETWORK = NETWORKS / "local.yml"
READY_TIMEOUT_S = 120


@dataclass(frozen=True)
class Endpoint:
    host: str
    role: str
    rpc: str
    p2p: str
    prometheus: str | None
    peer_id: str | None


@dataclass(frozen=True)
class Service:
    host: str
    service: str
    url: str


@dataclass(frozen=True)
class UpResult:
    genesis_hash: str
    changed: int
    finalized: int
    endpoints: list[Endpoint]
    services: list[Service]
    # The network's public URLs: rpc_url, and <service>_url for each service deployed.
    public: dict[str, str]
    # The gateway's development API key (paid from //Alice), when a gateway is deployed.
    gateway_api_key: str | None = None
    # Each engine behind each worker (local_engines.py).
    workers: list[local_engines.WorkerEngine] = field(default_factory=list)
    # prometheus_url and alertmanager_url, when the monitoring is deployed (roles/monitoring).
    monitoring: dict[str, str] | None = None


def devnode_binary() -> Path:
    node = Path(sys.executable).with_name("devnode")
    if not node.exists():
        raise OpsError(f"the development node is not installed at {node}; run scripts/bootstrap")
    return node


def render_local_spec(node: Path, out: Path) -> tuple[str, bool]:
    """Render the local spec into ``out`` unless the render there has the same inputs (and
    checks out); (genesis hash, reused)."""
    inputs = render_cache.RenderInputs(
        network_sha256=sha256_file(LOCAL_NETWORK),
        node_binary_sha256=sha256_file(node),
        node_version=devnode_source_digest(),
        runtime_sha256=None,
        revision=None,
        renderer=render_cache.renderer_version(),
    )
    return render_cache.render_cached(out, inputs, LOCAL_NETWORK, node)


def up(on_step: Callable[[str], None] = lambda _: None, strategy: str | None = None,
       engine: str = "test", converge: bool = False) -> UpResult:
    """``converge``: run the playbook even when its inputs match the last successful run's."""
    local_engines.check_engine(engine)
    state = localnet_dir()
    if not _supervisor_running(state):
        _refuse_taken_ports(state)
    if engine != "test":
        local_engines.ensure_installed(on_step)
    state.mkdir(parents=True, exist_ok=True)
    node = devnode_binary()
    on_step("rendering the local chain spec")
    spec_dir = state / "chainspec"
    genesis, _ = render_local_spec(node, spec_dir)
    baseline = _finalized_before(state, genesis)
    extravars = {
        "net_chainspec_dir": str(spec_dir),
        "node_binary_src": str(node),
        "node_binary_sha256": sha256_file(node),
        "net_state_dir": str(state),
        **local_engines.extra_vars(engine, state),
    }
    digest = converge_inputs.inputs_digest(extravars, spec_dir)
    last = converge_inputs.recorded(state)
    if not converge and last is not None and last["digest"] == digest \
            and _all_programs_running(state):
        on_step("the converge's inputs did not change and every program runs: no playbook run")
        hosts, changed = [str(h) for h in last["hosts"]], 0
    else:
        converge_inputs.forget(state)
        on_step("running playbooks/site.yml on inventories/local")
        result: PlaybookResult = run_playbook(
            PLAYBOOKS / "site.yml",
            LOCAL_INVENTORY,
            extravars,
            on_task=lambda task: on_step(f"site.yml: {task}"),
            strategy=strategy,
        )
        hosts, changed = result.hosts, result.changed
        converge_inputs.record(state, digest, hosts)
    endpoints = endpoints_of(state, hosts)
    public = next((e for e in endpoints if e.role == "rpc"), None)
    if public is None:
        raise OpsError(
            "the local inventory deployed no RPC node; nothing serves the public endpoint"
        )
    on_step(f"waiting for {public.rpc} to serve genesis {genesis[:18]}…")
    wait_serving(public.rpc, genesis, READY_TIMEOUT_S)
    on_step("waiting for finality to advance")
    _, finalized = wait_finality_advances(public.rpc, READY_TIMEOUT_S, since=baseline)
    services, urls = services_of(state, hosts)
    return UpResult(genesis, changed, finalized, endpoints, services,
                    {"rpc_url": public.rpc, **urls}, gateway_api_key(state, services),
                    local_engines.workers_of(state, hosts),
                    monitoring_of(state, hosts))


def _finalized_before(state: Path, genesis: str) -> int | None:
    """The public endpoint's finalized height before the run, if it already serves ``genesis``:
    finality that advanced during the run needs no further wait afterwards."""
    for manifest_file in sorted(state.glob(f"*/{MANIFEST_NAME}")):
        manifest = read_local_manifest(state, manifest_file.parent.name) or {}
        if manifest.get("role") != "rpc":
            continue
        client = RpcClient(f"http://127.0.0.1:{manifest.get('rpc_port')}", timeout=1)
        try:
            return client.finalized_number() if client.genesis_hash() == genesis else None
        except RpcError:
            return None
    return None


def endpoints_of(state: Path, hosts: list[str]) -> list[Endpoint]:
    """Endpoints of the ``hosts`` that have a host manifest (the nodes), from those manifests."""
    out = []
    for host in hosts:
        manifest: dict[str, Any] = read_local_manifest(state, host) or {}
        if not manifest:
            continue
        prom = manifest.get("prometheus_port")
        out.append(
            Endpoint(
                host=host,
                role=str(manifest.get("role")),
                rpc=f"ws://127.0.0.1:{manifest.get('rpc_port')}",
                p2p=f"/ip4/127.0.0.1/tcp/{manifest.get('p2p_port')}",
                prometheus=f"http://127.0.0.1:{prom}/metrics" if prom else None,
                peer_id=manifest.get("peer_id"),
            )
        )
    return out


def services_of(state: Path, hosts: list[str]) -> tuple[list[Service], dict[str, str]]:
    """The services among ``hosts`` (those with a service manifest) and their public URLs by
    key (faucet_url, ...)."""
    services, urls = [], {}
    for host in hosts:
        manifest: dict[str, Any] = read_local_manifest(state, host, SERVICE_MANIFEST_NAME) or {}
        if not manifest.get("public_url"):
            continue
        services.append(Service(host, str(manifest.get("service")), manifest["public_url"]))
        urls[str(manifest.get("public_url_key"))] = manifest["public_url"]
    return services, urls


def monitoring_of(state: Path, hosts: list[str]) -> dict[str, str] | None:
    """Prometheus's and Alertmanager's URLs, from the manifests roles/monitoring wrote after
    each program got ready."""
    urls = {}
    for host in hosts:
        for program in ("prometheus", "alertmanager"):
            manifest = read_local_manifest(state, host, f"{program}/{SERVICE_MANIFEST_NAME}")
            if manifest and manifest.get("public_url"):
                urls[f"{program}_url"] = str(manifest["public_url"])
    return urls or None


def gateway_api_key(state: Path, services: list[Service]) -> str | None:
    """The development key the gateway role placed (roles/gateway: gateway_dev_api_key)."""
    for svc in services:
        path = state / svc.host / "secrets" / "dev_api_key"
        if svc.service == "gateway" and path.is_file():
            return path.read_text().strip() or None
    return None


def _refuse_taken_ports(state: Path) -> None:
    busy = port_check.taken(port_check.node_ports(load_inventory(LOCAL_INVENTORY)))
    if busy:
        raise InputError(port_check.conflict_message(busy, str(state), str(LOCAL_INVENTORY)))


def _supervisord_pid(state: Path) -> int | None:
    """The pid of the local network's supervisord, None when none answers."""
    if not supervisor_conf(state).exists():
        return None
    try:
        return Supervisor(supervisor_conf(state)).pid()
    except SupervisorError:
        return None


def _all_programs_running(state: Path) -> bool:
    """supervisord runs, knows programs, and every one of them is RUNNING."""
    if not supervisor_conf(state).exists():
        return False
    try:
        programs = Supervisor(supervisor_conf(state)).processes()
    except SupervisorError:
        return False
    return bool(programs) and all(p.statename == "RUNNING" for p in programs)


def _supervisor_running(state: Path) -> bool:
    return _supervisord_pid(state) is not None


def down() -> str:
    """Stop every program of the local network; data and keys stay."""
    state = localnet_dir()
    if not _supervisor_running(state):
        return f"the local network is not running (no supervisord for {state})"
    failed = Supervisor(supervisor_conf(state)).stop_all()
    if failed:
        raise OpsError("stopping the local network failed: supervisord could not stop "
                       + "; ".join(f"{f.namespec} ({f.description})" for f in failed))
    return f"stopped the local network; data kept in {state}"


def check_purge_target(state: Path) -> None:
    """Refuse to delete anything that does not look like a local network's state directory."""
    if not state.exists():
        return
    manifest = state / "chainspec" / "manifest.json"
    if not (supervisor_conf(state).exists() or manifest.exists()):
        raise InputError(
            f"{state} does not look like a local network's state (no supervisor/supervisord.conf,"
            " no chainspec/manifest.json); refusing to delete it. Check NET_LOCALNET_DIR"
        )
    if manifest.exists() and '"net_local"' not in manifest.read_text():
        raise InputError(f"{state} holds the chain spec of another network; refusing to delete it")


def purge_plan(state: Path) -> str:
    return (
        f"will stop the local network's supervisord and delete {state} (chain data, keystores,"
        " node keys, logs and the rendered chain spec of the local network)"
    )


def _wait_gone(pid: int, timeout_s: float) -> None:
    # supervisord stops its programs before it exits: deleting their files before that races them.
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    raise OpsError(f"supervisord (pid {pid}) did not exit within {timeout_s:.0f} s; not deleting")


def purge() -> str:
    state = localnet_dir()
    check_purge_target(state)
    if not state.exists():
        return f"nothing to purge: {state} does not exist"
    pid = _supervisord_pid(state)
    if pid is not None:
        # Gone meanwhile is as good: the wait says whether it is.
        with contextlib.suppress(SupervisorUnreachable):
            Supervisor(supervisor_conf(state)).shutdown()
        _wait_gone(pid, timeout_s=60)
    shutil.rmtree(state)
    return f"purged {state}"

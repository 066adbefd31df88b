"""The test network's shape end to end on real systemd hosts (issue 19, item 4): the production
path, over SSH as the sudo user with `become`, host keys checked.

One fleet for the module: authority-0, authority-1 and rpc-0 as `inventories/testnet` lays them
out, and full-node-1 for an operator. The test inventory is generated in a temporary directory:
its hosts.yml is the testnet hosts.yml with each host's address (and how to reach it), its
group_vars are links to `inventories/testnet/group_vars` (unchanged), and the vault a maintainer
fills in holds the development secrets. What differs from a real deploy, and why:
- the node binary is the development-node bundle (`ops-tools node devnode-bundle`), and the
  network definition is testnet.yml with the development keys, the hosts' addresses and 1 s
  slots (its own keys' secrets are not in the repository);
- the RPC node is reached without nginx in front (`rpc_proxy_enabled: false`,
  `rpc_external: true`): the hosts' image has no nginx yet (roles/edge brings the TLS front);
- the services and the docs site are left out (their groups are empty): they need the suite's
  virtualenv, PostgreSQL and nginx on the services machine, which the image does not have yet.

Then `ops-tools status`, `ops-tools reset-cycle` through its remote (pyinfra) path onto a
revision of the fixture pallet-suite, a second cycle killed while in reset-authorities and
finished with `--resume`, and the operator's `playbooks/full_node.yml` with
`inventories/operator`'s group vars on a fresh host.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from ops_tools.chain.rpc import RpcClient, RpcError
from ops_tools.chain.status import wait_finality_advances
from ops_tools.checksums import sha256_file
from ops_tools.deploy.inventory import load_inventory
from ops_tools.deploy.runner import strategy_env
from ops_tools.reset.context import cycle_dir
from tests.ansible.conftest import ansible_env
from tests.build.conftest import FIXTURE, SuiteRepo, git
from tests.conftest import ROOT
from tests.hosts.hosts import Fleet, boot_fleet, missing_tools, stop_fleet

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(missing_tools()), reason="systemd test hosts need root and "
                       f"{', '.join(missing_tools())} (scripts/bootstrap)"),
]

BIN = Path(sys.executable).parent
TESTNET = ROOT / "inventories" / "testnet"
OPERATOR = ROOT / "inventories" / "operator"
NODE_HOSTS = ("authority-0", "authority-1", "rpc-0")
FULL_NODE = "full-node-1"
# The development secrets of inventories/local: their public halves replace testnet.yml's keys.
DEV_SECRETS = {
    "authority-0": ("//Alice", "a2cc9425a5480a81c81ae322ec325170eea0837b465236606ff462a1824e5583"),
    "authority-1": ("//Bob", "c91fcc4eded70da1abd1b3a4b1ef3bc303b9e308ecbc598efa3a8a92571fca07"),
}
TIMINGS: dict[str, float] = {}


def _timed(name: str, started: float) -> None:
    TIMINGS[name] = round(time.monotonic() - started, 1)
    print(f"{name}: {TIMINGS[name]} s")


def _run(argv: list[str], env: dict[str, str], timeout: float = 900,
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def _out(proc: subprocess.CompletedProcess[str]) -> str:
    return "\n".join((proc.stdout + "\n" + proc.stderr).splitlines()[-80:])


def network_definition(fleet: Fleet) -> dict[str, Any]:
    """testnet.yml with the development keys of local.yml, the authorities' addresses on the
    fleet, and 1 s slots (a test waits for finality several times)."""
    net = yaml.safe_load((ROOT / "chainspec/networks/testnet.yml").read_text())
    dev = yaml.safe_load((ROOT / "chainspec/networks/local.yml").read_text())
    net["consensus"]["slot_duration_ms"] = 1000
    for authority, keys in zip(net["authorities"], dev["authorities"], strict=True):
        address = fleet.by_name(authority["name"]).address
        authority.update({k: keys[k] for k in ("aura", "grandpa", "peer_id")},
                         address=f"/ip4/{address}/tcp/30333")
    return net


def _link_group_vars(source: Path, dest: Path) -> None:
    """Every group_vars file of the real inventory, linked: unchanged by construction."""
    for path in sorted(source.rglob("*.yml")):
        link = dest / path.relative_to(source)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(path)


def write_testnet_inventory(base: Path, fleet: Fleet, overrides: dict[str, Any]) -> Path:
    inv = base / "testnet"  # the directory name is the network's (docs/reset.md)
    _link_group_vars(TESTNET / "group_vars", inv / "group_vars")
    secrets = {
        "vault_authority_session_suris": {
            h: {"aura": suri, "grandpa": suri} for h, (suri, _) in DEV_SECRETS.items()},
        "vault_node_keys": {h: key for h, (_, key) in DEV_SECRETS.items()},
    }
    vault = inv / "group_vars" / "authorities" / "vault.yml"
    vault.write_text(yaml.safe_dump(secrets))
    vault.chmod(0o600)
    shape = yaml.safe_load((TESTNET / "hosts.yml").read_text())
    groups = shape["all"]["children"]
    for node_group in groups["nodes"]["children"].values():
        for name in list(node_group.get("hosts") or {}):
            node_group["hosts"][name] = {**fleet.by_name(name).ansible_vars(), **overrides,
                                         **(RPC_WITHOUT_PROXY if name == "rpc-0" else {})}
    # Services and the docs site need what the hosts' image lacks (see the module docstring).
    for group in groups["services"]["children"].values():
        group["hosts"] = {}
    groups["docs"]["hosts"] = {}
    # nginx with TLS in front (roles/edge) has its own scenario (roles/edge/molecule/systemd);
    # here the RPC node is reached directly.
    groups["edge"]["hosts"] = {}
    (inv / "hosts.yml").write_text(yaml.safe_dump(shape, sort_keys=False))
    return inv


RPC_WITHOUT_PROXY = {"rpc_proxy_enabled": False, "rpc_external": True}


def write_operator_inventory(base: Path, fleet: Fleet, artifacts: dict[str, Any]) -> Path:
    inv = base / "operator"
    _link_group_vars(OPERATOR / "group_vars", inv / "group_vars")
    shape = yaml.safe_load((OPERATOR / "hosts.yml").read_text())
    hosts = shape["all"]["children"]["full_nodes"]["hosts"]
    (name,) = hosts
    assert name == FULL_NODE
    hosts[name] = {**fleet.by_name(FULL_NODE).ansible_vars(), **artifacts}
    (inv / "hosts.yml").write_text(yaml.safe_dump(shape, sort_keys=False))
    return inv


# Asked on the host itself: a full node's RPC answers on its loopback only.
GENESIS_ON_LOOPBACK = (
    "import json, urllib.request as u\n"
    "body = json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': 'chain_getBlockHash',"
    " 'params': [0]}).encode()\n"
    "req = u.Request('http://127.0.0.1:9944', body, {'Content-Type': 'application/json'})\n"
    "print(json.load(u.urlopen(req, timeout=5))['result'])\n"
)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("testnet-shape")
    # The playbooks run with the strategy ops-tools gives them (mitogen), as the reset cycle's.
    env = ansible_env(NET_OPS_STATE=str(base / "ops-state"),
                      OPS_TOOLS_CACHE=str(base / "build-cache"), **strategy_env(None))
    started = time.monotonic()
    # The bundle is built while the hosts boot.
    with ThreadPoolExecutor(max_workers=1) as pool:
        bundling = pool.submit(_run, [str(BIN / "ops-tools"), "node", "devnode-bundle", "--out",
                                      str(base / "net-node"), "--json"], env)
        fleet = boot_fleet([*NODE_HOSTS, FULL_NODE], base / "hosts")
        _timed("boot 4 hosts (bundle built meanwhile)", started)
        bundled = bundling.result()
    try:
        assert bundled.returncode == 0, _out(bundled)
        bundle = json.loads(bundled.stdout)
        started = time.monotonic()
        network = base / "testnet-dev.yml"
        network.write_text(yaml.safe_dump(network_definition(fleet), sort_keys=False))
        render = base / "render-0"
        proc = _run([str(BIN / "ops-tools"), "chainspec", "render", "--network", str(network),
                     "--node", str(BIN / "devnode"), "--out", str(render)], env)
        assert proc.returncode == 0, _out(proc)
        _timed("render", started)
        public_url = f"http://{fleet.by_name('rpc-0').address}:9944"
        inventory = write_testnet_inventory(base, fleet, {
            "net_public_rpc_url": public_url,
            "net_network_definition": str(network),
            "net_node_kind": "devnode",
        })
        suite_path = base / "pallet-suite"
        shutil.copytree(FIXTURE, suite_path, ignore=shutil.ignore_patterns("target"))
        git(suite_path, "init", "-q", "-b", "main")
        suite = SuiteRepo(suite_path)
        suite.commit("commit 1")
        yield {
            "base": base, "env": env, "fleet": fleet, "inventory": inventory, "render": render,
            "bundle": Path(bundle["path"]), "bundle_sha256": bundle["sha256"],
            "public": RpcClient(public_url), "public_url": public_url, "suite": suite,
        }
    finally:
        stop_fleet(base / "hosts")
        print(f"wall times: {TIMINGS}")


def site(world: dict[str, Any], *extra: str) -> subprocess.CompletedProcess[str]:
    return _run([str(BIN / "ansible-playbook"), "-i", str(world["inventory"]),
                 "playbooks/site.yml",
                 "-e", f"net_chainspec_dir={world['render']}",
                 "-e", f"node_binary_src={world['bundle']}",
                 "-e", f"node_binary_sha256={world['bundle_sha256']}", *extra], world["env"])


def manifest(world: dict[str, Any], host: str) -> dict[str, Any]:
    h = world["fleet"].by_name(host)
    proc = h.ssh("sudo cat " + shlex.quote(f"/var/lib/net/{host}/deployed.json"))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_site_deploys_the_shape_over_ssh_with_become(world):
    started = time.monotonic()
    proc = site(world)
    _timed("site.yml", started)
    assert proc.returncode == 0, _out(proc)
    genesis = json.loads((world["render"] / "manifest.json").read_text())["genesis_hash"]
    for host in NODE_HOSTS:
        h = world["fleet"].by_name(host)
        unit = sorted(h.ssh("systemctl show net-node -p ActiveState -p User").stdout.split())
        assert unit == ["ActiveState=active", "User=net"], (host, unit)
        assert manifest(world, host)["genesis_hash"] == genesis
    assert world["public"].genesis_hash() == genesis
    wait_finality_advances(world["public_url"], 60)


def test_status_reads_every_node_over_ssh(world):
    started = time.monotonic()
    proc = _run([str(BIN / "ops-tools"), "status", "--inventory", str(world["inventory"]),
                 "--json"], world["env"])
    _timed("status", started)
    assert proc.returncode == 0, _out(proc)
    found = {h["host"]: h for h in json.loads(proc.stdout)}
    genesis = world["public"].genesis_hash()
    assert set(found) == set(NODE_HOSTS)
    for host, h in found.items():
        assert h["genesis"] == h["deployed_genesis"] == genesis, host
        assert h["genesis_match"] is True and h["service"] == "active", h
        assert h["best"] >= 1 and h["peers"] >= 1, h
    assert {found[h]["role"] for h in NODE_HOSTS} == {"authority", "rpc"}


def test_reset_path_refuses_a_host_whose_key_is_not_known(world, tmp_path):
    from ops_tools.reset.hostops import HostOpFailed, Machines

    inventory = load_inventory(world["inventory"])
    with Machines(inventory, ["rpc-0"]) as machines:  # the known key: it connects
        assert machines.output("rpc-0", "id -u").strip() == "0"  # become, as in Ansible
    unknown = tmp_path / "known_hosts"
    unknown.write_text("")
    inventory.hostvars["rpc-0"]["ansible_ssh_common_args"] = f"-o UserKnownHostsFile={unknown}"
    with pytest.raises(HostOpFailed, match="cannot connect"):
        Machines(inventory, ["rpc-0"])
    assert unknown.read_text() == "", "the host's key was added instead of refused"


def cycle_argv(world: dict[str, Any], *extra: str) -> list[str]:
    return [str(BIN / "ops-tools"), "reset-cycle", "--inventory", str(world["inventory"]),
            "--repo", str(world["suite"].path), "--ref", "main", "--json", *extra]


def journal(world: dict[str, Any]) -> dict[str, Any]:
    path = Path(world["env"]["NET_OPS_STATE"]) / "reset" / cycle_dir(
        world["inventory"]).name / "journal.json"
    return json.loads(path.read_text())


def assert_new_chain(world: dict[str, Any], report: dict[str, Any], old: str) -> None:
    new = report["expected_genesis"]
    assert report["decision"] == "reset" and new != old
    assert report["downtime_s"] is not None and report["downtime_s"] > 0
    print(f"reset-cycle downtime: {report['downtime_s']} s, total {report['total_s']} s")
    for phase in report["phases"]:
        print(f"  {phase['name']:<18} {phase['seconds']:6.2f} s  {phase['detail'][:70]}")
    assert world["public"].genesis_hash() == new
    wait_finality_advances(world["public_url"], 60)
    for host in NODE_HOSTS:
        assert manifest(world, host)["genesis_hash"] == new, host


def test_reset_cycle_over_ssh_onto_a_new_revision(world):
    old = world["public"].genesis_hash()
    started = time.monotonic()
    proc = _run(cycle_argv(world, "--yes"), world["env"])
    _timed("reset-cycle (cold build)", started)
    assert proc.returncode == 0, _out(proc)
    assert_new_chain(world, json.loads(proc.stdout), old)


def test_cycle_killed_in_reset_authorities_finishes_with_resume(world):
    old = world["public"].genesis_hash()
    world["suite"].commit("commit 2: spec 7", world["suite"].set_spec_version(7))
    previous = journal(world)["cycle_id"]
    started = time.monotonic()
    proc = subprocess.Popen(cycle_argv(world, "--yes"), cwd=ROOT, env=world["env"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while True:
            assert time.monotonic() < deadline, "the cycle never reached reset-authorities"
            assert proc.poll() is None, "the cycle ended before it could be killed"
            try:
                current = journal(world)
            except (FileNotFoundError, ValueError):
                current = {}
            phases = current.get("phases", []) if current.get("cycle_id") != previous else []
            if any(p["name"] == "reset-authorities" and p["status"] == "running"
                   for p in phases):
                break
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    killed = journal(world)
    assert killed["status"] == "running"
    assert killed["phases"][-1]["name"] == "reset-authorities"
    assert killed["phases"][-1]["status"] == "running"
    # Killed mid-reset: the network is down (the nodes were stopped before the purge).
    with pytest.raises(RpcError):
        world["public"].genesis_hash()
    resumed = _run(cycle_argv(world, "--resume", "--yes"), world["env"])
    _timed("reset-cycle killed, then --resume", started)
    assert resumed.returncode == 0, _out(resumed)
    report = json.loads(resumed.stdout)
    assert report["cycle_id"] == killed["cycle_id"]
    names = [p["name"] for p in report["phases"]]
    assert names.count("reset-authorities") == 2 and names.count("stop-nodes") == 1
    interrupted = next(p for p in report["phases"] if p["name"] == "reset-authorities")
    assert interrupted["status"] == "interrupted"
    assert_new_chain(world, report, old)


def test_operator_full_node_with_the_operator_group_vars(world):
    raw = Path(journal(world)["facts"]["render_dir"]) / "raw.json"
    inventory = write_operator_inventory(world["base"], world["fleet"], {
        "genesis_preflight_rpc_url": world["public_url"],
        "genesis_preflight_binary_src": str(world["bundle"]),
        "genesis_preflight_binary_sha256": world["bundle_sha256"],
        "genesis_preflight_chainspec_src": str(raw),
        "genesis_preflight_chainspec_sha256": sha256_file(raw),
        "genesis_preflight_cache_dir": str(world["base"] / "full-node-cache"),
    })
    started = time.monotonic()
    proc = _run([str(BIN / "ansible-playbook"), "-i", str(inventory), "playbooks/full_node.yml"],
                world["env"])
    _timed("full_node.yml", started)
    assert proc.returncode == 0, _out(proc)
    assert "genesis_check: match" in proc.stdout, _out(proc)
    genesis = world["public"].genesis_hash()
    h = world["fleet"].by_name(FULL_NODE)
    served = h.ssh(shlex.join(["python3", "-c", GENESIS_ON_LOOPBACK]))
    assert served.stdout.strip() == genesis, served.stdout + served.stderr
    # Its RPC answers on the host's loopback only.
    with pytest.raises(RpcError):
        RpcClient(f"http://{h.address}:9944", timeout=3).genesis_hash()

"""The test network's shape end to end on real systemd hosts (issue 19, item 4): the production
path, over SSH as the sudo user with `become`, host keys checked.

One fleet for the module, every machine `inventories/testnet` names: authority-0, authority-1,
rpc-0, services-0, and full-node-1 for an operator. The test inventory is generated in a
temporary directory: its hosts.yml is the testnet hosts.yml with each inventory host pointed at
its machine (every service host, edge-services-0 and docs-0 at services-0, edge-rpc-0 at rpc-0,
as the real `ansible_host` names say), its group_vars are links to
`inventories/testnet/group_vars` (unchanged), and the vault files a maintainer fills in hold
development secrets. The services run under systemd from /opt/net/venv, the indexer on the
machine's PostgreSQL, all behind nginx with TLS (roles/edge). What differs from a real deploy,
and why:
- the node binary is the development-node bundle (`ops-tools node devnode-bundle`), and the
  network definition is testnet.yml with the development keys, the hosts' addresses, the
  faucet account of local.yml (//Faucet) and 1 s slots (its own keys' secrets are not in the
  repository);
- the suite's virtualenv at /opt/net/venv (services-0, full-node-1) is this controller's,
  bundled (tests/hosts/venv_bundle.py) while the hosts boot and unpacked into the machines' root
  file systems before site.yml: the hosts reach no package index, and the inventories leave
  installing it to the machine's provisioning;
- the certificates come from a throwaway CA made in the test's directory (tests/hosts/tls.py,
  `NET_TESTNET_TLS_DIR`), valid 30 days;
- the gateway admits workers on private addresses (`gateway_allow_private_endpoints`): the
  operator's worker announces full-node-1's address on the test bridge (10.77.n.0/24), where a
  real operator's is public;
- no resolver here knows the `*.testnet.invalid` names: every command the test runs on the
  controller (ansible-playbook, `ops-tools`) runs in a mount namespace of its own whose
  /etc/hosts names the machines and the public names (`named`), and trusts the test CA
  (`SSL_CERT_FILE`); the reset cycle and `ops-tools status` so ask the public endpoint
  (`net_public_rpc_url`, wss://rpc.testnet.invalid) through the edge, as on the real network.
  The monitoring host (services-0) gets the same from its role: `/etc/hosts` entries for every
  public name at its edge's address (`monitoring_probe_hosts`) and the test CA as its probes'
  CA (`monitoring_probe_ca_src`), both test-network options (docs/monitoring.md).
  The test's own clients trust the CA alone and connect to a machine's address with the public
  name (SNI and Host).

Then `ops-tools status` (nodes and services), `ops-tools reset-cycle` through its remote
(pyinfra) path onto a revision of the fixture pallet-suite, with the services staged, restarted
over SSH and ready on the new genesis (through the edge, each one's not-ready window printed)
and the new release on the docs site, a second cycle killed while in reset-authorities and
finished with `--resume`, then the operator's `playbooks/full_node.yml` (from the artifacts the
docs site lists) and `playbooks/operator_worker.yml` with `inventories/operator`'s group vars
on a fresh host (full-node-1): its node, then its worker onboarded through the edge's faucet,
attestation service and gateway, under systemd. That host
resolves the public names from its /etc/hosts and trusts the test CA (its system store and the
bundle of the virtualenv's `certifi`), as a real host trusts the network's real certificates;
it has no GPU, so the onboarding records none (`operator_no_gpu`) and the worker serves the
built-in test engine (`operator_test_engine`), both test-network options.

Last, on that converged network with the operator's worker live (before it, GatewayNoLiveWorker
fires, and a drill never starts on a network with a firing alert): `ops-tools backup` over SSH
and `ops-tools restore`, the key-loss drill on authority-0, and the drills on the test
inventory itself, monitoring included, each alert seen firing in Alertmanager on services-0
and resolving: partition (and one killed mid-fault, finished with `--resume`), authority-down,
rpc-down, faucet-drain (the faucet's seed a plain value in the test inventory) and
service-down faucet.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.client import HTTPException
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from ops_tools.chain.rpc import RpcClient, RpcError
from ops_tools.deploy.inventory import load_inventory
from ops_tools.deploy.runner import strategy_env
from ops_tools.reset.context import cycle_dir
from tests.ansible.conftest import ansible_env
from tests.build.conftest import FIXTURE, SuiteRepo, git
from tests.conftest import ROOT
from tests.hosts import edge_client, tls
from tests.hosts.hosts import Fleet, boot_fleet, missing_tools, stop_fleet

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(missing_tools()), reason="systemd test hosts need root and "
                       f"{', '.join(missing_tools())} (scripts/bootstrap)"),
]

BIN = Path(sys.executable).parent
TESTNET = ROOT / "inventories" / "testnet"
OPERATOR = ROOT / "inventories" / "operator"
SHAPE = yaml.safe_load((TESTNET / "hosts.yml").read_text())
# Every node of the shape: the authorities, the public RPC node and the services machine's node.
NODE_HOSTS = tuple(h for g in ("authorities", "rpc_nodes")
                   for h in SHAPE["all"]["children"]["nodes"]["children"][g]["hosts"])
SERVICES_MACHINE = "services-0"
FULL_NODE = "full-node-1"
MACHINES = ("authority-0", "authority-1", "rpc-0", SERVICES_MACHINE, FULL_NODE)
# Each service's inventory host and the edge site in front of it (group_vars/edge/main.yml).
SERVICE_SITES = {"faucet-0": "faucet", "attestation-0": "attestation", "explorer-0": "explorer",
                 "indexer-0": "indexer", "gateway-0": "gateway"}
# The units on services-0 (the indexer is two: its processor and its API).
SERVICE_UNITS = ("faucet", "attestation", "explorer", "indexer-processor", "indexer", "gateway")
# The development secrets of inventories/local: their public halves replace testnet.yml's keys.
DEV_SECRETS = {
    "authority-0": ("//Alice", "a2cc9425a5480a81c81ae322ec325170eea0837b465236606ff462a1824e5583"),
    "authority-1": ("//Bob", "c91fcc4eded70da1abd1b3a4b1ef3bc303b9e308ecbc598efa3a8a92571fca07"),
}
# What the services' groups take from their vaults: public development values (local.yml
# endows //Faucet; the settlement account pays nothing here, no worker runs).
SERVICE_VAULTS = {
    "faucet": {"vault_faucet_seed": "//Faucet",
               "vault_faucet_salt": "testnet-shape-faucet-salt-8c1e4a7f"},
    "attestation": {"vault_attestation_mock_root_seed": "testnet-shape-seed-5d0c7a93e1f2",
                    "vault_attestation_salt": "testnet-shape-attestation-salt-2b9d"},
    "monitoring": {"vault_monitoring_webhook_url": ""},
    "gateways": {"vault_gateway_worker_secret": "testnet-shape-worker-secret-4b8e1f0c2d7a9e6b3c5f",
                 "vault_gateway_settlement_seed": "//Ferdie"},
}
# sr25519 //ServicesDrip (as roles/service/molecule/systemd): an account the network does not
# endow.
DRIP_RECIPIENT = "5EEfJMJgzStPU8XTWo5rKUwDBUJPavxrq8WhcJaFVgS1tweY"
TIMINGS: dict[str, float] = {}


def _timed(name: str, started: float) -> None:
    TIMINGS[name] = round(time.monotonic() - started, 1)
    print(f"{name}: {TIMINGS[name]} s")


def named(argv: list[str], env: dict[str, str]) -> list[str]:
    """``argv`` in a mount namespace of its own whose /etc/hosts is ``env["NET_TEST_HOSTS"]``
    (when set): this machine's file is left alone. ``exec`` keeps the command's PID."""
    if "NET_TEST_HOSTS" not in env:
        return argv
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount --bind "$0" /etc/hosts && exec "$@"', env["NET_TEST_HOSTS"], *argv]


def _run(argv: list[str], env: dict[str, str], timeout: float = 900,
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(named(argv, env), cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def _out(proc: subprocess.CompletedProcess[str]) -> str:
    return "\n".join((proc.stdout + "\n" + proc.stderr).splitlines()[-80:])


def network_definition(fleet: Fleet) -> dict[str, Any]:
    """testnet.yml with the development keys of local.yml, the authorities' addresses on the
    fleet, local.yml's faucet account (//Faucet, whose seed the faucet gets) and 1 s slots (a
    test waits for finality several times)."""
    net = yaml.safe_load((ROOT / "chainspec/networks/testnet.yml").read_text())
    dev = yaml.safe_load((ROOT / "chainspec/networks/local.yml").read_text())
    net["consensus"]["slot_duration_ms"] = 1000
    for authority, keys in zip(net["authorities"], dev["authorities"], strict=True):
        address = fleet.by_name(authority["name"]).address
        authority.update({k: keys[k] for k in ("aura", "grandpa", "peer_id")},
                         address=f"/ip4/{address}/tcp/30333")
    (faucet,) = (a for a in dev["accounts"] if a["name"] == "faucet")
    for account in net["accounts"]:
        if account["name"] == "faucet":
            account["address"] = faucet["address"]
    return net


def machine_of(host: str) -> str:
    """The machine an inventory host of the shape is on (its ansible_host's first label)."""
    for group in _groups(SHAPE["all"]):
        if host in (group.get("hosts") or {}):
            return str(group["hosts"][host]["ansible_host"]).split(".")[0]
    raise KeyError(host)


def _groups(group: dict[str, Any]) -> list[dict[str, Any]]:
    children = list((group.get("children") or {}).values())
    return [group] + [g for child in children for g in _groups(child)]


def names_file(path: Path, fleet: Fleet, sites: dict[str, list[str]]) -> Path:
    """This machine's /etc/hosts, plus each machine's name and every public name at the
    address of the machine whose edge serves it (the resolver of a real deploy)."""
    lines = [Path("/etc/hosts").read_text().rstrip("\n")]
    lines += [f"{h.address} {h.name}.testnet.invalid" for h in fleet.hosts]
    lines += [f"{fleet.by_name(m).address} {' '.join(ns)}" for m, ns in public_names(sites).items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def public_names(sites: dict[str, list[str]]) -> dict[str, list[str]]:
    """Per machine, the public names its nginx serves: its edge's sites (edge_site_names) and
    the docs site on a docs host."""
    out: dict[str, list[str]] = {}
    for name, hostvars in SHAPE["all"]["children"]["edge"]["hosts"].items():
        out.setdefault(machine_of(name), []).extend(
            n for site in hostvars["edge_site_names"] for n in sites[site])
    for name in SHAPE["all"]["children"]["docs"]["hosts"]:
        out.setdefault(machine_of(name), []).extend(sites["docs"])
    return out


def edge_sites() -> dict[str, list[str]]:
    """Each edge site's public names, as the testnet inventory's group vars give them."""
    def gv(group: str) -> dict[str, Any]:
        return yaml.safe_load((TESTNET / "group_vars" / group / "main.yml").read_text())

    rpc = gv("all")
    return {
        "rpc": [rpc["net_rpc_public_hostname"], rpc["net_rpc_alias_hostname"]],
        "docs": [rpc["net_docs_public_hostname"]],
        **{site: [gv(site)[f"{site}_public_hostname"]]
           for site in ("faucet", "attestation", "explorer")},
        "indexer": [gv("indexers")["indexer_public_hostname"]],
        "gateway": [str(urlsplit(gv("gateways")["gateway_public_url"]).hostname)],
    }


def _link_group_vars(source: Path, dest: Path) -> None:
    """Every group_vars file of the real inventory, linked: unchanged by construction."""
    for path in sorted(source.rglob("*.yml")):
        link = dest / path.relative_to(source)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(path)


def _vault(inv: Path, group: str, secrets: dict[str, Any]) -> None:
    vault = inv / "group_vars" / group / "vault.yml"
    vault.write_text(yaml.safe_dump(secrets))
    vault.chmod(0o600)


def write_testnet_inventory(base: Path, fleet: Fleet, overrides: dict[str, Any],
                            monitoring: dict[str, Any] | None = None) -> Path:
    inv = base / "testnet"  # the directory name is the network's (docs/reset.md)
    _link_group_vars(TESTNET / "group_vars", inv / "group_vars")
    _vault(inv, "authorities", {
        "vault_authority_session_suris": {
            h: {"aura": suri, "grandpa": suri} for h, (suri, _) in DEV_SECRETS.items()},
        "vault_node_keys": {h: key for h, (_, key) in DEV_SECRETS.items()},
    })
    for group, secrets in SERVICE_VAULTS.items():
        _vault(inv, group, secrets)
    shape = yaml.safe_load((TESTNET / "hosts.yml").read_text())
    groups = shape["all"]["children"]

    def point(hosts: dict[str, Any], extra: dict[str, Any]) -> None:
        # Each inventory host on the machine its real ansible_host names (<machine>.testnet...).
        for name, hostvars in hosts.items():
            machine = fleet.by_name(str(hostvars["ansible_host"]).split(".")[0])
            hosts[name] = {**hostvars, **machine.ansible_vars(), **overrides, **extra}

    for node_group in groups["nodes"]["children"].values():
        point(node_group.get("hosts") or {}, {})
    extra: dict[str, dict[str, Any]] = {
        # The operator's worker announces its machine's address, private on the test bridge.
        "gateways": {"gateway_allow_private_endpoints": True},
        # The faucet-drain drill moves the faucet's balance with its seed, read from the
        # inventory as a plain value (the vault's, a public development one here).
        "faucet": {"faucet_seed": SERVICE_VAULTS["faucet"]["vault_faucet_seed"]},
    }
    for name, group in groups["services"]["children"].items():
        point(group["hosts"], extra.get(name, {}))
    point(groups["edge"]["hosts"], {})
    point(groups["docs"]["hosts"], {})
    point(groups["monitoring"]["hosts"], monitoring or {})
    (inv / "hosts.yml").write_text(yaml.safe_dump(shape, sort_keys=False))
    return inv


def write_operator_inventory(base: Path, fleet: Fleet, node: dict[str, Any],
                             worker: dict[str, Any]) -> Path:
    """inventories/operator with its group vars linked, its full node and its GPU server both
    on the full-node machine (hosts.yml: "add it to both groups") with ``node`` and ``worker``
    set per host, and the workers' vault."""
    inv = base / "operator"
    _link_group_vars(OPERATOR / "group_vars", inv / "group_vars")
    shape = yaml.safe_load((OPERATOR / "hosts.yml").read_text())
    machine = fleet.by_name(FULL_NODE).ansible_vars()
    for group, extra in (("full_nodes", node), ("operator_workers", worker)):
        hosts = shape["all"]["children"][group]["hosts"]
        (name,) = hosts
        hosts[name] = {**hosts[name], **machine, **extra}
    (inv / "hosts.yml").write_text(yaml.safe_dump(shape, sort_keys=False))
    _vault(inv, "operator_workers", {
        "vault_operator_passphrase": "testnet-shape-operator-passphrase",
    })
    return inv


# Asked on the host itself: a full node's RPC answers on its loopback only.
GENESIS_ON_LOOPBACK = (
    "import json, urllib.request as u\n"
    "body = json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': 'chain_getBlockHash',"
    " 'params': [0]}).encode()\n"
    "req = u.Request('http://127.0.0.1:9944', body, {'Content-Type': 'application/json'})\n"
    "print(json.load(u.urlopen(req, timeout=5))['result'])\n"
)


def _as_an_operator_host(fleet: Fleet, ca: Path, names: dict[str, list[str]]) -> None:
    """The full-node machine as an operator's server sees the network: the public names
    resolve (its /etc/hosts) and the test CA is trusted (the system store, and certifi's
    bundle in /opt/net/venv, which httpx uses), as real certificates are (the docstring)."""
    host = fleet.by_name(FULL_NODE)
    root = Path(host.root) / "merged"
    with (root / "etc/hosts").open("a") as hosts:
        hosts.writelines(f"{fleet.by_name(m).address} {' '.join(ns)}\n" for m, ns in names.items())
    shutil.copyfile(ca, root / "usr/local/share/ca-certificates/net-test-ca.crt")
    for bundle in (root / "opt/net/venv/lib").glob("python3*/site-packages/certifi/cacert.pem"):
        with bundle.open("a") as out:
            out.write(ca.read_text())
    proc = host.ssh("sudo update-ca-certificates")
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("testnet-shape")
    tls_dir = base / "tls"
    # The playbooks run with the strategy ops-tools gives them (mitogen), as the reset cycle's;
    # the edge takes its certificates from the test CA's directory.
    env = ansible_env(NET_OPS_STATE=str(base / "ops-state"),
                      OPS_TOOLS_CACHE=str(base / "build-cache"),
                      NET_TESTNET_TLS_DIR=str(tls_dir), **strategy_env(None))
    started = time.monotonic()
    # The node and services bundles are built while the hosts boot.
    with ThreadPoolExecutor(max_workers=2) as pool:
        bundling = pool.submit(_run, [str(BIN / "ops-tools"), "node", "devnode-bundle", "--out",
                                      str(base / "net-node"), "--json"], env)
        venv = base / "venv.tar.gz"
        venv_bundling = pool.submit(_run, [sys.executable, "-m", "tests.hosts.venv_bundle",
                                           str(venv)], env)
        sites = edge_sites()
        # Beyond TlsCertificateExpiring's 14 days: the monitoring has nothing firing by the
        # service-down drill (its healthy step).
        ca = tls.make(tls_dir, sites, days="30")
        fleet = boot_fleet(list(MACHINES), base / "hosts")
        _timed("boot 5 hosts (bundles built meanwhile)", started)
        # The controller's commands resolve the network's names and trust its CA (docstring).
        env.update(NET_TEST_HOSTS=str(names_file(base / "etc-hosts", fleet, sites)),
                   SSL_CERT_FILE=str(ca))
        bundled, venv_bundled = bundling.result(), venv_bundling.result()
    try:
        assert bundled.returncode == 0, _out(bundled)
        assert venv_bundled.returncode == 0, _out(venv_bundled)
        bundle = json.loads(bundled.stdout)
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=2) as pool:
            unpacking = [pool.submit(fleet.by_name(m).unpack, venv)
                         for m in (SERVICES_MACHINE, FULL_NODE)]
            network = base / "testnet-dev.yml"
            network.write_text(yaml.safe_dump(network_definition(fleet), sort_keys=False))
            render = base / "render-0"
            proc = _run([str(BIN / "ops-tools"), "chainspec", "render", "--network",
                         str(network), "--node", str(BIN / "devnode"), "--out", str(render)], env)
            assert proc.returncode == 0, _out(proc)
            for unpacked in unpacking:
                unpacked.result()
        _as_an_operator_host(fleet, ca, public_names(sites))
        _timed("render (the suite's virtualenv unpacked meanwhile)", started)
        # The monitoring host probes the public names at the edges' addresses and trusts the
        # test CA (docstring).
        inventory = write_testnet_inventory(base, fleet, {
            "net_network_definition": str(network),
            "net_node_kind": "devnode",
        }, {"monitoring_probe_hosts": {n: fleet.by_name(m).address
                                       for m, ns in public_names(sites).items() for n in ns},
            "monitoring_probe_ca_src": str(ca)})
        suite_path = base / "pallet-suite"
        shutil.copytree(FIXTURE, suite_path, ignore=shutil.ignore_patterns("target"))
        git(suite_path, "init", "-q", "-b", "main")
        suite = SuiteRepo(suite_path)
        suite.commit("commit 1")
        yield {
            "base": base, "env": env, "fleet": fleet, "inventory": inventory, "render": render,
            "bundle": Path(bundle["path"]), "bundle_sha256": bundle["sha256"],
            "suite": suite, "ca": str(ca), "sites": sites,
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
    h = world["fleet"].by_name(machine_of(host))
    proc = h.ssh("sudo cat " + shlex.quote(f"/var/lib/net/{host}/deployed.json"))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def edge(world: dict[str, Any], site: str, path: str = "/", body: Any = None, *,
         name: int = 0, timeout: float = 10) -> tuple[int, Any]:
    """``path`` of a site through its machine's nginx, under the site's public name, with the
    certificate checked against the test CA."""
    machine = "rpc-0" if site == "rpc" else SERVICES_MACHINE
    return edge_client.https(world["sites"][site][name], world["fleet"].by_name(machine).address,
                             world["ca"], path, body, timeout)


def public_rpc(world: dict[str, Any], method: str, params: list[Any] | None = None, *,
               name: int = 0) -> tuple[int, Any]:
    """A JSON-RPC call to the public endpoint (the edge on rpc-0) under its public name, or
    its alias with ``name=1``: its status and answer."""
    return edge(world, "rpc", "/", {"jsonrpc": "2.0", "id": 1, "method": method,
                                    "params": params or []}, name=name)


def public_genesis(world: dict[str, Any]) -> str:
    status, answer = public_rpc(world, "chain_getBlockHash", [0])
    assert status == 200 and "result" in answer, (status, answer)
    return str(answer["result"])


def wait_public_finality(world: dict[str, Any], timeout: float = 60) -> None:
    """Until the public endpoint's finalized height grows."""
    def finalized() -> int:
        _, head = public_rpc(world, "chain_getFinalizedHead")
        _, header = public_rpc(world, "chain_getHeader", [head["result"]])
        return int(header["result"]["number"], 16)

    start, deadline = finalized(), time.monotonic() + timeout
    while finalized() <= start:
        assert time.monotonic() < deadline, f"finality stuck at #{start} on the public endpoint"
        time.sleep(0.5)


def docs_release(world: dict[str, Any]) -> dict[str, Any]:
    """The docs site's current release, as the public downloads it."""
    status, release = edge(world, "docs", "/releases/current/release.json")
    assert status == 200, (status, release)
    return release


INDEX_STATUS = {"query": "{ indexStatus { genesisHash height } }"}


def service_genesis(world: dict[str, Any], host: str) -> str | None:
    """The genesis a service is ready on, asked through the edge: its /ready's chain check (the
    indexer: what its GraphQL API says it indexes); None while not ready."""
    site = SERVICE_SITES[host]
    try:
        if site == "indexer":
            status, answer = edge(world, site, "/graphql", INDEX_STATUS)
            data = (answer.get("data") or {}) if status == 200 else {}
            return (data.get("indexStatus") or {}).get("genesisHash")
        status, answer = edge(world, site, "/ready")
    except (OSError, HTTPException):  # nothing answers: nginx or the service is restarting
        return None
    if status != 200:
        return None
    return next(c["detail"] for c in answer["checks"] if c["name"] == "chain")


def assert_services_on(world: dict[str, Any], genesis: str) -> None:
    found = {host: service_genesis(world, host) for host in SERVICE_SITES}
    assert found == dict.fromkeys(SERVICE_SITES, genesis), found


def test_site_deploys_the_shape_over_ssh_with_become(world):
    started = time.monotonic()
    proc = site(world)
    _timed("site.yml", started)
    assert proc.returncode == 0, _out(proc)
    genesis = json.loads((world["render"] / "manifest.json").read_text())["genesis_hash"]
    for host in NODE_HOSTS:
        h = world["fleet"].by_name(machine_of(host))
        unit = sorted(h.ssh("systemctl show net-node -p ActiveState -p User").stdout.split())
        assert unit == ["ActiveState=active", "User=net"], (host, unit)
        assert manifest(world, host)["genesis_hash"] == genesis
    assert public_genesis(world) == genesis
    wait_public_finality(world)
    units = [f"net-{s}.service" for s in SERVICE_UNITS]
    shown = world["fleet"].by_name(SERVICES_MACHINE).ssh(
        shlex.join(["systemctl", "show", "-p", "ActiveState", "-p", "User", *units]))
    states = [sorted(block.split()) for block in shown.stdout.strip().split("\n\n")]
    # Each service as a user of its own; the indexer's two programs are one service.
    users = [f"net-{s.removesuffix('-processor')}" for s in SERVICE_UNITS]
    assert states == [["ActiveState=active", f"User={u}"] for u in users], (units, states)


def test_the_edge_serves_every_site_over_tls(world):
    started = time.monotonic()
    genesis = public_genesis(world)
    for name in range(2):  # the public name and its alias
        status, answer = public_rpc(world, "chain_getBlockHash", [0], name=name)
        assert (status, answer.get("result")) == (200, genesis), answer
    _, refused = public_rpc(world, "author_rotateKeys")
    assert "error" in refused and "result" not in refused, refused
    wss = edge_client.wss_check(world["sites"]["rpc"][1], world["fleet"].by_name("rpc-0").address,
                                world["ca"])
    assert wss["heads"][1] > wss["heads"][0] and "error" in wss["unsafe"], wss
    assert_services_on(world, genesis)
    assert docs_release(world)["genesis_hash"] == genesis
    # The faucet signs and sends a drip, asked as the public asks it.
    status, drip = edge(world, "faucet", "/drip-public", {"recipient": DRIP_RECIPIENT},
                        timeout=120)
    assert status == 200 and drip["recipient"] == DRIP_RECIPIENT, drip
    assert int(drip["block_number"]) > 0, drip
    # Monitoring and API documentation are not published ...
    hidden = {site: [edge(world, site, path)[0] for path in ("/metrics", "/openapi.json", "/docs")]
              for site in SERVICE_SITES.values()}
    assert all(status == 404 for statuses in hidden.values() for status in statuses), hidden
    # Nor is the gateway's list of every worker; an operator's signed view of its own is.
    assert [edge(world, "gateway", path)[0] for path in ("/v1/workers", "/v1/workers/")] \
        == [404, 404]
    status, anonymous = edge(world, "gateway", "/v1/workers/mine", {})
    assert status == 401 and anonymous["error"]["code"] == "invalid_view_request", anonymous
    # ... and still served on the machine's loopback, where the monitoring asks.
    local = world["fleet"].by_name(SERVICES_MACHINE).ssh(
        "python3 -c 'import urllib.request as u; print(*(u.urlopen(\"http://127.0.0.1:%d/metrics\""
        " % port).status for port in (8001, 8005)))'")
    assert local.stdout.split() == ["200", "200"], local
    _timed("edge checks (TLS, every site, a drip, hidden paths)", started)


def test_status_reads_every_node_and_service_over_ssh(world):
    started = time.monotonic()
    proc = _run([str(BIN / "ops-tools"), "status", "--inventory", str(world["inventory"]),
                 "--json"], world["env"])
    _timed("status", started)
    assert proc.returncode == 0, _out(proc)
    found = {h["host"]: h for h in json.loads(proc.stdout)}
    genesis = public_genesis(world)
    assert set(found) == {*NODE_HOSTS, *SERVICE_SITES}
    for host in NODE_HOSTS:
        h = found[host]
        assert h["genesis"] == h["deployed_genesis"] == genesis, host
        assert h["genesis_match"] is True and h["service"] == "active", h
        assert h["best"] >= 1 and h["peers"] >= 1, h
    assert {found[h]["role"] for h in NODE_HOSTS} == {"authority", "rpc"}
    for host in SERVICE_SITES:
        h = found[host]
        chain = next(c for c in h["checks"] if c["name"] == "chain")
        assert h["role"] == "service" and h["ready"] is True, h
        assert chain == {"name": "chain", "ok": True, "detail": genesis}, h


# Asked on the monitoring host: Prometheus listens on its loopback (group_vars/monitoring).
PROMETHEUS_GET = (
    "import sys, urllib.request as u\n"
    "print(u.urlopen('http://127.0.0.1:9090' + sys.argv[1], timeout=10).read().decode())\n"
)
# A TCP connection from the host it runs on: open, refused, or dropped (no answer in 3 s).
CONNECT = (
    "import socket, sys\n"
    "s = socket.socket()\n"
    "s.settimeout(3)\n"
    "try:\n"
    "    s.connect((sys.argv[1], int(sys.argv[2])))\n"
    "    print('open')\n"
    "except TimeoutError:\n"
    "    print('dropped')\n"
    "except ConnectionRefusedError:\n"
    "    print('refused')\n"
)
RECAP = re.compile(r"^(?P<host>\S+)\s*: ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)", re.M)
METRICS_PORT = 9615  # group_vars/all's node_prometheus_port
METRICS_TABLE = "inet net_node_metrics"  # roles/node's node_metrics_firewall_table


def prometheus(world: dict[str, Any], path: str) -> Any:
    proc = world["fleet"].by_name(SERVICES_MACHINE).ssh(
        shlex.join(["python3", "-c", PROMETHEUS_GET, path]))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["data"]


def connect(world: dict[str, Any], machine: str, host: str) -> str:
    """What a connection from ``machine`` to ``host``'s metrics port meets."""
    address = world["fleet"].by_name(machine_of(host)).address
    proc = world["fleet"].by_name(machine).ssh(
        shlex.join(["python3", "-c", CONNECT, address, str(METRICS_PORT)]))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def wait_monitoring(world: dict[str, Any], timeout: float = 180,
                    ) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Until Prometheus has every node target up and every public probe succeeding: the node
    targets by host, and probe_success of the public probes by site (the last seen, on a
    timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        targets = prometheus(world, "/api/v1/targets?state=active")["activeTargets"]
        nodes = {t["labels"]["host"]: t for t in targets if t["labels"]["job"] == "node"}
        probes = prometheus(world, "/api/v1/query?query="
                            "probe_success%7Bjob%3D~%22public%7Cpublic_rpc%22%7D")["result"]
        success = {r["metric"]["site"]: r["value"][1] for r in probes}
        done = (set(nodes) == set(NODE_HOSTS) and all(t["health"] == "up" for t in nodes.values())
                and success and set(success.values()) == {"1"})
        if done or time.monotonic() > deadline:
            return nodes, success
        time.sleep(2)


def test_monitoring_scrapes_every_node_and_probes_the_public_endpoints(world):
    """Prometheus on services-0 scrapes every node at its private address (the nodes'
    --prometheus-external), its blackbox probes reach every public endpoint through the edges
    (the role's /etc/hosts entries, the test CA); the nodes' metrics port answers the monitoring
    host alone: from any other machine the connection is dropped by the node role's nftables
    table."""
    started = time.monotonic()
    nodes, success = wait_monitoring(world)
    _timed("monitoring: every node target up, every public probe succeeding", started)
    print(f"node targets: { {h: t['scrapeUrl'] for h, t in nodes.items()} }")
    print(f"public probes: {success}")
    alerts = prometheus(world, "/api/v1/alerts")["alerts"]
    print(f"alerts: {sorted((a['labels']['alertname'], a['state']) for a in alerts)}")
    assert {h: t["health"] for h, t in nodes.items()} == dict.fromkeys(NODE_HOSTS, "up"), nodes
    for host, target in nodes.items():  # the other machines' nodes at their address
        expected = ("127.0.0.1" if machine_of(host) == SERVICES_MACHINE
                    else world["fleet"].by_name(machine_of(host)).address)
        assert urlsplit(target["scrapeUrl"]).hostname == expected, target
    assert set(success) == {"rpc", "docs", *SERVICE_SITES.values()}, success
    assert set(success.values()) == {"1"}, success
    # The attack: the metrics port of each node on another machine, from a machine that is not
    # the monitoring host (dropped), and from the monitoring host (open).
    remote = [h for h in NODE_HOSTS if machine_of(h) != SERVICES_MACHINE]
    for host in remote:
        other = "rpc-0" if machine_of(host) != "rpc-0" else FULL_NODE
        assert connect(world, other, host) == "dropped", host
        assert connect(world, SERVICES_MACHINE, host) == "open", host


def test_metrics_firewall_is_restored_by_its_role_and_honours_check_mode(world):
    """The node role's rules removed by hand on authority-1: the port is open to anyone; the
    role in check mode says it would load them and loads nothing; a run loads them (dropped
    again); a second run changes nothing."""
    authority = world["fleet"].by_name(machine_of("authority-1"))
    assert connect(world, FULL_NODE, "authority-1") == "dropped"
    removed = authority.ssh(f"sudo nft delete table {METRICS_TABLE}")
    assert removed.returncode == 0, removed.stderr
    assert connect(world, FULL_NODE, "authority-1") == "open"
    playbook = world["base"] / "metrics-firewall.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "The nodes' metrics firewall", "hosts": "authorities:rpc_nodes",
        "gather_facts": False,
        "tasks": [{"ansible.builtin.include_role": {"name": "net.ops.node",
                                                     "tasks_from": "metrics_firewall"}}]}]))
    argv = [str(BIN / "ansible-playbook"), "-i", str(world["inventory"]), str(playbook)]
    started = time.monotonic()
    checked = _run([*argv, "--check"], world["env"])
    assert checked.returncode == 0, _out(checked)
    recap = {m["host"]: int(m["changed"]) for m in RECAP.finditer(checked.stdout)}
    assert recap["authority-1"] > 0 and sum(recap.values()) == recap["authority-1"], recap
    assert authority.ssh(f"sudo nft list table {METRICS_TABLE}").returncode != 0
    assert connect(world, FULL_NODE, "authority-1") == "open"
    applied = _run(argv, world["env"])
    assert applied.returncode == 0, _out(applied)
    assert connect(world, FULL_NODE, "authority-1") == "dropped"
    again = _run(argv, world["env"])
    assert again.returncode == 0, _out(again)
    recap = {m["host"]: int(m["changed"]) for m in RECAP.finditer(again.stdout)}
    assert recap == dict.fromkeys(NODE_HOSTS, 0), _out(again)
    _timed("metrics firewall: check mode, restore, no-change run", started)
    # The node kept serving (a reload, not a restart) and the monitoring host still reaches it.
    assert connect(world, SERVICES_MACHINE, "authority-1") == "open"


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


class ServiceWatch:
    """Each service asked through the edge once a second while a cycle runs: when it stopped
    being ready on the old genesis and when it was ready on the new one (printed, not judged:
    speed lives in benchmarks/)."""

    def __init__(self, world: dict[str, Any], old: str) -> None:
        self.world, self.old = world, old
        self.seen: dict[str, list[tuple[float, str | None]]] = {h: [] for h in SERVICE_SITES}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.wait(1.0):
            for host, seen in self.seen.items():
                seen.append((time.time(), service_genesis(self.world, host)))

    def __enter__(self) -> ServiceWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def windows(self, new: str) -> dict[str, float | None]:
        """Per service, seconds from its last answer on the old genesis to its first on the
        new one (None: never seen on the new one while watched)."""
        out: dict[str, float | None] = {}
        for host, seen in self.seen.items():
            last_old = max((t for t, g in seen if g == self.old), default=None)
            first_new = min((t for t, g in seen if g == new), default=None)
            out[host] = (round(first_new - last_old, 1)
                         if first_new is not None and last_old is not None else None)
        return out


def assert_new_chain(world: dict[str, Any], report: dict[str, Any], old: str,
                     watch: ServiceWatch | None = None) -> None:
    new = report["expected_genesis"]
    assert report["decision"] == "reset" and new != old
    assert report["downtime_s"] is not None and report["downtime_s"] > 0
    print(f"reset-cycle downtime: {report['downtime_s']} s, total {report['total_s']} s")
    for phase in report["phases"]:
        print(f"  {phase['name']:<18} {phase['seconds']:6.2f} s  {phase['detail'][:90]}")
    print(f"downtime breakdown ({report['downtime_s']} s):")
    for part in report["downtime_breakdown"]:
        print(f"  {part['phase']:<18} {part['seconds']:6.2f} s")
        for step in part["steps"]:
            print(f"      {step['seconds']:6.2f} s  {step['step'][:140]}")
    assert public_genesis(world) == new
    wait_public_finality(world)
    for host in NODE_HOSTS:
        assert manifest(world, host)["genesis_hash"] == new, host
    # The services phase waited for every service's /ready on the host; through the edge too.
    assert_services_on(world, new)
    # The publish phase made the new genesis the docs site's current release.
    assert docs_release(world)["genesis_hash"] == new
    if watch is not None:
        print(f"services not ready (through the edge, 1 s polls): {watch.windows(new)}")


def test_reset_cycle_over_ssh_onto_a_new_revision(world):
    old = public_genesis(world)
    started = time.monotonic()
    with ServiceWatch(world, old) as watch:
        proc = _run(cycle_argv(world, "--yes"), world["env"])
    _timed("reset-cycle (cold build)", started)
    assert proc.returncode == 0, _out(proc)
    report = json.loads(proc.stdout)
    staged = next(p for p in report["phases"] if p["name"] == "restart-services")
    assert staged["detail"].startswith("restarted "), staged
    assert_new_chain(world, report, old, watch)


GENESIS_ON_HOST = (
    "import json, urllib.request as u\n"
    "body = b'{\"id\":1,\"jsonrpc\":\"2.0\",\"method\":\"chain_getBlockHash\",\"params\":[0]}'\n"
    "request = u.Request('http://127.0.0.1:9944', body, {'Content-Type': 'application/json'})\n"
    "print(json.load(u.urlopen(request, timeout=3))['result'])\n"
)


def authorities_serving(world: dict[str, Any], genesis: str, timeout: float = 60) -> list[str]:
    """The authorities whose node serves ``genesis``, asked on their machines once systemd's
    jobs there are over (an active node is asked until it answers)."""
    deadline, serving = time.monotonic() + timeout, []
    for host in ("authority-0", "authority-1"):
        machine = world["fleet"].by_name(machine_of(host))
        while True:
            state = machine.ssh("systemctl is-active net-node").stdout.strip()
            if state == "active":
                answer = machine.ssh(shlex.join(["python3", "-c", GENESIS_ON_HOST]))
                if answer.returncode == 0:
                    if answer.stdout.strip() == genesis:
                        serving.append(host)
                    break
            elif state not in ("activating", "deactivating", "reloading"):
                break
            assert time.monotonic() < deadline, f"{host}'s node never settled: {state}"
            time.sleep(0.5)
    return serving


def test_cycle_killed_in_reset_authorities_finishes_with_resume(world):
    old = public_genesis(world)
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
            phases = current.get("steps", []) if current.get("cycle_id") != previous else []
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
    assert killed["steps"][-1]["name"] == "reset-authorities"
    assert killed["steps"][-1]["status"] == "running"
    # A live cycle stops each authority inside its reset-authorities command: the kill lands
    # before or after that stop, machine by machine. What the resumed run must do follows from
    # what the hosts show once systemd's jobs are over.
    running = authorities_serving(world, old)
    # Killed mid-reset: the network is down (the nodes were stopped before the purge); the
    # edge answers for it.
    status, answer = public_rpc(world, "chain_getBlockHash", [0])
    assert status == 502, (status, answer)
    resumed = _run(cycle_argv(world, "--resume", "--yes"), world["env"])
    _timed("reset-cycle killed, then --resume", started)
    assert resumed.returncode == 0, _out(resumed)
    report = json.loads(resumed.stdout)
    assert report["cycle_id"] == killed["cycle_id"]
    names = [p["name"] for p in report["phases"]]
    assert names.count("reset-authorities") == 2
    # What the killed run journaled as done is checked against the hosts before it is skipped:
    # with every node stopped, stop-nodes is kept; an authority the kill left running is
    # stopped by it, and the record says why.
    again = {p["name"]: p for p in report["phases"][len(killed["steps"]):]}
    stop = again["stop-nodes"]
    if running:
        assert stop["status"] == "done", (running, stop)
        assert stop["detail"].startswith("done again ("), stop
        assert all(f"{host} serves" in stop["detail"] for host in running), (running, stop)
    else:
        assert stop["status"] == "checked", stop
    # The services were staged and restarted once: what the killed run did is kept, not redone.
    for name in ("stage-services", "restart-services"):
        runs = [p for p in report["phases"] if p["name"] == name and p["status"] != "checked"]
        assert len(runs) == 1, (name, report["phases"])
    interrupted = next(p for p in report["phases"] if p["name"] == "reset-authorities")
    assert interrupted["status"] == "interrupted"
    assert_new_chain(world, report, old)


def test_edge_down_is_repaired_by_its_role_and_the_chain_continues(world):
    """The public endpoint's nginx stopped while every node serves: the cycle decides repair,
    re-converges the edge with its role and touches no chain data (the chain continues)."""
    genesis = public_genesis(world)
    _, head = public_rpc(world, "chain_getHeader")
    best = int(head["result"]["number"], 16)
    stopped = world["fleet"].by_name("rpc-0").ssh("sudo systemctl stop nginx")
    assert stopped.returncode == 0, stopped.stderr
    with pytest.raises(OSError):  # the edge is down: nothing answers on the public name
        public_rpc(world, "chain_getBlockHash", [0])
    started = time.monotonic()
    proc = _run(cycle_argv(world, "--yes"), world["env"])
    _timed("reset-cycle repairing the edge", started)
    assert proc.returncode == 0, _out(proc)
    report = json.loads(proc.stdout)
    assert report["decision"] == "repair", report
    assert report["down"] == ["public endpoint"], report["down"]
    phases = {p["name"]: p["detail"] for p in report["phases"]}
    assert phases["repair-nodes"] == "every node answers"
    assert "edge.yml re-converged" in phases["repair-edge"], phases
    assert "edge-rpc-0" in phases["repair-edge"], phases
    assert public_genesis(world) == genesis
    _, head = public_rpc(world, "chain_getHeader")
    assert int(head["result"]["number"], 16) > best  # the same chain, continued
    for host in NODE_HOSTS:
        assert manifest(world, host)["genesis_hash"] == genesis, host


OPERATOR_WORKER_PORT = 8101  # group_vars/operator_workers' operator_worker_port


@pytest.fixture(scope="module")
def operator_inventory(world) -> Path:
    """inventories/operator for the full-node machine: the artifacts of the network's current
    release as the docs site lists them (the group vars' URLs, the node's file named as this
    release names it, the development node), and for the worker what hosts.yml says to set per
    host (its own node's RPC, the address the gateway calls) and the test-network options
    (docstring)."""
    release = docs_release(world)
    node_file = release["node_file"]
    address = world["fleet"].by_name(FULL_NODE).address
    return write_operator_inventory(world["base"], world["fleet"], {
        "genesis_preflight_binary_src":
            f"https://{world['sites']['docs'][0]}/releases/current/{node_file}",
        "genesis_preflight_binary_sha256": release["files"][node_file]["sha256"],
        "genesis_preflight_chainspec_sha256": release["files"]["raw.json"]["sha256"],
        "genesis_preflight_cache_dir": str(world["base"] / "full-node-cache"),
    }, {
        "operator_rpc_url": "ws://127.0.0.1:9944",
        "operator_worker_public_url": f"http://{address}:{OPERATOR_WORKER_PORT}",
        "operator_test_engine": True,
        "operator_no_gpu": True,
    })


def test_operator_full_node_with_the_operator_group_vars(world, operator_inventory):
    started = time.monotonic()
    proc = _run([str(BIN / "ansible-playbook"), "-i", str(operator_inventory),
                 "playbooks/full_node.yml"], world["env"])
    _timed("full_node.yml", started)
    assert proc.returncode == 0, _out(proc)
    assert "genesis_check: match" in proc.stdout, _out(proc)
    genesis = public_genesis(world)
    h = world["fleet"].by_name(FULL_NODE)
    served = h.ssh(shlex.join(["python3", "-c", GENESIS_ON_LOOPBACK]))
    assert served.stdout.strip() == genesis, served.stdout + served.stderr
    # Its RPC answers on the host's loopback only.
    with pytest.raises(RpcError):
        RpcClient(f"http://{h.address}:9944", timeout=3).genesis_hash()


def test_operator_worker_onboards_on_its_server(world, operator_inventory):
    """playbooks/operator_worker.yml on the operator's server over SSH with become: the
    onboarding on the host (its own full node for the chain, the edge for the faucet, the
    attestation service and the gateway), the worker under a hardened systemd unit, live at the
    gateway; a second run changes nothing."""
    argv = [str(BIN / "ansible-playbook"), "-i", str(operator_inventory),
            "playbooks/operator_worker.yml"]
    started = time.monotonic()
    first = _run(argv, world["env"])
    _timed("operator_worker.yml", started)
    assert first.returncode == 0, _out(first)
    host = world["fleet"].by_name(FULL_NODE)
    report = json.loads(host.ssh("sudo cat /var/lib/net/operator/operator/report.json").stdout)
    assert report["gateway_view"]["live"] is True, report
    assert report["worker_url"] == f"http://{host.address}:{OPERATOR_WORKER_PORT}", report
    assert report["gpu"]["no_gpu"] is True and report["heartbeat_epoch"] is not None, report
    unit = host.ssh("systemctl show net-worker-operator -p ActiveState -p NoNewPrivileges -p User")
    assert sorted(unit.stdout.split()) == ["ActiveState=active", "NoNewPrivileges=yes",
                                           "User=net-worker"], unit
    # Its own unprivileged user: the process, and the secrets it reads (roles/worker's, beside
    # its configuration; the onboarding's own stay root's).
    pid = host.ssh("systemctl show -p MainPID --value net-worker-operator").stdout.strip()
    owner = host.ssh(f"sudo stat -c %U {shlex.quote(f'/proc/{pid}')}"
                     " /var/lib/net/operator/operator/worker/secrets/passphrase"
                     " /var/lib/net/operator/operator/secrets/passphrase").stdout.split()
    assert owner == ["net-worker", "net-worker", "root"], owner
    watchdog = host.ssh("systemctl show net-worker-operator -p Type -p WatchdogUSec").stdout
    assert sorted(watchdog.split()) == ["Type=notify", "WatchdogUSec=2min"], watchdog
    again = _run(argv, world["env"])
    assert again.returncode == 0, _out(again)
    recap = {m["host"]: int(m["changed"]) for m in RECAP.finditer(again.stdout)}
    assert recap == {"gpu-server-1": 0}, _out(again)


# The partition drill's nftables tables (ops_tools/drills/firewall.py), on every node machine.
DRILL_TABLES = "sudo nft list tables | grep -c net_drill_ || true"


BACKUP_PASSPHRASE = "testnet-shape backup passphrase, never on a command line"
# Run on services-0 as the faucet's user: a row of the test's own in its live database.
FAUCET_PROBE = (
    "import sqlite3, sys\n"
    "with sqlite3.connect(sys.argv[1], timeout=30) as c:\n"
    "    c.execute('create table if not exists backup_probe (v text)')\n"
    "    if len(sys.argv) > 2:\n"
    "        c.execute('delete from backup_probe')\n"
    "        c.execute('insert into backup_probe values (?)', (sys.argv[2],))\n"
    "    print(c.execute('select v from backup_probe').fetchone()[0])\n"
)


def passphrase_file(world: dict[str, Any]) -> Path:
    path = world["base"] / "backup-passphrase"
    if not path.exists():
        path.write_text(BACKUP_PASSPHRASE + "\n")
        path.chmod(0o600)
    return path


def faucet_probe(world: dict[str, Any], db: str, value: str | None = None) -> str:
    services = world["fleet"].by_name(SERVICES_MACHINE)
    argv = ["sudo", "-u", "net-faucet", "python3", "-c", FAUCET_PROBE, db]
    proc = services.ssh(shlex.join(argv + ([value] if value else [])))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def ops(world: dict[str, Any], *argv: str, timeout: float = 900,
        ) -> subprocess.CompletedProcess[str]:
    return _run([str(BIN / "ops-tools"), *argv], world["env"], timeout=timeout)


def test_backup_over_ssh_holds_what_cannot_be_rebuilt_and_restore_puts_it_back(world):
    """`ops-tools backup --inventory <the shape>` over SSH: every node's network key, both
    authorities' session keystores, the faucet's, gateway's and attestation service's SQLite
    databases (copied on services-0 through SQLite's backup API while they run) and the
    release the nodes run, sealed; `ops-tools restore` maps every key back to where it is
    (nothing to write) and brings the faucet's database back to the backup's state."""
    inventory, pf = str(world["inventory"]), str(passphrase_file(world))
    genesis = public_genesis(world)
    from ops_tools.backup import hostio
    from ops_tools.backup.locate import service_site

    loaded = load_inventory(world["inventory"])
    io = hostio.of("faucet-0", loaded.hostvars["faucet-0"])
    faucet = service_site(loaded, "faucet-0", "faucet", io)
    io.close()
    assert faucet is not None and faucet.engine == "sqlite", faucet
    db = str(faucet.sqlite_path)
    assert faucet_probe(world, db, "at backup") == "at backup"
    out = world["base"] / "backup-1"
    started = time.monotonic()
    made = ops(world, "backup", "--inventory", inventory, "--out", str(out),
               "--passphrase-file", pf, "--json")
    _timed("backup over ssh", started)
    assert made.returncode == 0, _out(made)
    result = json.loads(made.stdout)
    assert result["network"]["genesis_hash"] == genesis
    kinds: dict[tuple[str, str | None], list[dict[str, Any]]] = {}
    for m in result["members"]:
        kinds.setdefault((m["kind"], m["host"]), []).append(m)
    assert {h for k, h in kinds if k == "node_key"} == set(NODE_HOSTS), sorted(kinds)
    # Each authority's aura and grandpa keys.
    assert {h: len(ms) for (k, h), ms in kinds.items() if k == "keystore"} == {
        "authority-0": 2, "authority-1": 2}, sorted(kinds)
    assert {h: ms[0]["name"] for (k, h), ms in kinds.items() if k == "database"} == {
        "faucet-0": "services/faucet-0/faucet.sqlite",
        "gateway-0": "services/gateway-0/gateway.sqlite",
        "attestation-0": "services/attestation-0/attestation.sqlite"}
    assert [m["name"] for m in kinds[("release", None)]] == \
        ["release/chainspec.json", "release/node", "release/release.json"]
    # The release: the deployed binary's sum, as the node's manifest records it.
    deployed = manifest(world, "authority-0")
    node_member = next(m for m in kinds[("release", None)] if m["name"] == "release/node")
    assert node_member["sha256"] == deployed["binary"]["sha256"]
    # Sealed: private files, and neither a key nor a database page in clear.
    assert sorted(p.name for p in out.iterdir()) == ["archive.tar.enc", "manifest.json"]
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in out.iterdir())
    sealed = (out / "archive.tar.enc").read_bytes()
    assert b"SQLite format 3" not in sealed and b"backup_probe" not in sealed
    key = world["fleet"].by_name("authority-0").ssh(
        f"sudo cat {shlex.quote(deployed['node_key_path'])} | base64 -w0").stdout.strip()
    assert key and base64.b64decode(key) not in sealed
    # Consistent copies: each database opens and passes SQLite's integrity check, and the
    # faucet's holds the row written before the backup.
    from ops_tools.backup import store

    opened = store.read(out, BACKUP_PASSPHRASE.encode())
    for name in ("services/faucet-0/faucet.sqlite", "services/gateway-0/gateway.sqlite",
                 "services/attestation-0/attestation.sqlite"):
        copy = world["base"] / "copy.db"
        copy.write_bytes(opened.files[name])
        with sqlite3.connect(copy) as conn:
            assert conn.execute("pragma integrity_check").fetchone() == ("ok",), name
            if "faucet" in name:
                assert conn.execute("select v from backup_probe").fetchone() == ("at backup",)
        conn.close()
        copy.unlink()
    # Restore: every key is where the backup says (nothing written, nothing restarted) ...
    keys = ops(world, "restore", "--inventory", inventory, "--from", str(out),
               "--passphrase-file", pf, "--kind", "node_key", "--kind", "keystore", "--yes",
               "--json")
    assert keys.returncode == 0, _out(keys)
    planned = json.loads(keys.stdout)
    assert {w["change"] for w in planned["writes"]} == {"same"}, planned
    assert len(planned["writes"]) == len(NODE_HOSTS) + 4 and planned["restarted"] == []
    # ... and the faucet's database, changed since, comes back (the faucet stopped, written
    # as its user's file, started, ready on the chain).
    assert faucet_probe(world, db, "after backup") == "after backup"
    started = time.monotonic()
    restored = ops(world, "restore", "--inventory", inventory, "--from", str(out),
                   "--passphrase-file", pf, "--host", "faucet-0", "--kind", "database",
                   "--yes", "--json")
    _timed("restore of the faucet's database over ssh", started)
    assert restored.returncode == 0, _out(restored)
    done = json.loads(restored.stdout)
    assert [(w["target"], w["change"]) for w in done["writes"]] == [(db, "replace")], done
    assert done["restarted"] == ["faucet-0"], done
    assert faucet_probe(world, db) == "at backup"
    services = world["fleet"].by_name(SERVICES_MACHINE)
    assert services.ssh(f"sudo stat -c %U {shlex.quote(db)}").stdout.strip() == "net-faucet"
    deadline = time.monotonic() + 120
    while service_genesis(world, "faucet-0") != genesis:
        assert time.monotonic() < deadline, "the faucet is not ready after the restore"
        time.sleep(1)


def test_key_loss_drill_restores_authority_0_with_the_same_peer_id(world):
    """`ops-tools drill key-loss` on the shape: authority-0's keystore and node key deleted on
    its machine, restored from the drill's backup over SSH (its node's files again, 0600), and
    finality resumes with the same peer id and session keys."""
    started = time.monotonic()
    proc = ops(world, "drill", "--inventory", str(world["inventory"]), "key-loss",
               "--backup-dir", str(world["base"] / "key-loss-backup"),
               "--passphrase-file", str(passphrase_file(world)), "--json", timeout=1200)
    _timed("drill key-loss", started)
    assert proc.returncode == 0, _out(proc)
    report = json.loads(proc.stdout)["report"]
    print(f"drill key-loss: {json.dumps(report, indent=1)}")
    assert report["host"] == "authority-0" and report["same_identity"] is True, report
    assert report["peer_id_before"] == report["peer_id_after"], report
    assert len(report["session_keys_after"]) == 2, report
    assert report["finalized_after"] > report["finalized_at_stop"], report
    deployed = manifest(world, "authority-0")
    assert report["peer_id_after"] == deployed["peer_id"], (report, deployed)
    authority = world["fleet"].by_name("authority-0")
    files = [deployed["node_key_path"], deployed["keystore_path"]]
    shown = authority.ssh("sudo stat -c '%U %a' " + " ".join(map(shlex.quote, files)))
    assert shown.stdout.split("\n")[:2] == ["net 600", "net 700"], shown
    wait_public_finality(world)


def drill_argv(world: dict[str, Any], *extra: str) -> list[str]:
    return [str(BIN / "ops-tools"), "drill", "--inventory", str(world["inventory"]), *extra]


def run_drill(world: dict[str, Any], *scenario: str) -> dict[str, Any]:
    """A drill on the test inventory, monitoring included: its report, the alert seen firing
    in Alertmanager on services-0 and resolved after the fault was removed."""
    started = time.monotonic()
    proc = _run(drill_argv(world, *scenario, "--json"), world["env"], timeout=1800)
    _timed(f"drill {' '.join(scenario)} (Alertmanager)", started)
    assert proc.returncode == 0, _out(proc)
    report = json.loads(proc.stdout)["report"]
    print(f"drill {' '.join(scenario)}: {json.dumps(report, indent=1)}")
    assert report["status"] == "completed", report
    assert report["detected_by"] == "alertmanager" and report["detect_s"] is not None, report
    assert report["resolve_s"] is not None and report["recover_s"] is not None, report
    return report


def drill_tables(world: dict[str, Any]) -> dict[str, int]:
    """How many tables of the drill each node machine's namespace holds."""
    return {host: int(world["fleet"].by_name(machine_of(host)).ssh(DRILL_TABLES).stdout or 0)
            for host in NODE_HOSTS}


def public_finalized(world: dict[str, Any]) -> int:
    _, head = public_rpc(world, "chain_getFinalizedHead")
    _, header = public_rpc(world, "chain_getHeader", [head["result"]])
    return int(header["result"]["number"], 16)


class FaultWatch:
    """While a drill runs: whether the cut authority's namespace holds the drill's rules, and
    the public endpoint's finalized height, once a second (pairs of (rules there, height))."""

    def __init__(self, world: dict[str, Any], cut: str) -> None:
        self.world, self.cut = world, world["fleet"].by_name(machine_of(cut))
        self.seen: list[tuple[bool, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.wait(1.0):
            ruled = self.cut.ssh(DRILL_TABLES).stdout.strip() not in ("", "0")
            try:
                self.seen.append((ruled, public_finalized(self.world)))
            except (OSError, HTTPException, KeyError, TypeError):
                continue

    def __enter__(self) -> FaultWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def during_fault(self) -> list[int]:
        return [height for ruled, height in self.seen if ruled]


def test_partition_drill_cuts_the_authorities_in_their_namespaces(world):
    """`ops-tools drill partition` on the shape, its monitoring included (the drills run once
    the operator's worker is live: before, GatewayNoLiveWorker fires and a drill refuses the
    network): nftables rules in the hosts' own network namespaces (over SSH, sudo) drop the p2p
    traffic between authority-1 and every other node; finality stalls while they are there,
    FinalityStalled fires in Alertmanager, and after the rules are gone finality advances
    again, the alert resolves and no rule is left on any machine."""
    assert drill_tables(world) == dict.fromkeys(NODE_HOSTS, 0)
    with FaultWatch(world, "authority-1") as watch:
        report = run_drill(world, "partition")
    assert report["scenario"]["fault"] == {
        "kind": "partition", "by": "nftables", "cut": "authority-1",
        "from": ["authority-0", "rpc-0", "services-node-0"]}, report["scenario"]
    assert report["scenario"]["alert"]["alertname"] == "FinalityStalled", report
    # Finality stood still while the rules were in place (a vote already on its way may land
    # just after the rules go in: one block at most) ...
    during = watch.during_fault()
    assert during, f"the rules were never seen on authority-1: {watch.seen}"
    assert max(during) - min(during) <= 1, watch.seen
    # ... and advances past that point after the removal.
    blocks = report["blocks"]
    assert blocks["finalized_after"] > max(during), (blocks, watch.seen)
    assert public_finalized(world) > max(during)
    assert drill_tables(world) == dict.fromkeys(NODE_HOSTS, 0)


def test_partition_drill_killed_mid_fault_is_restored_by_resume(world):
    """A drill SIGKILLed while its rules are in the hosts' namespaces leaves them there and its
    journal says so; `drill --resume` removes them and sees finality advance again."""
    cut = world["fleet"].by_name(machine_of("authority-1"))
    proc = subprocess.Popen(named(drill_argv(world, "partition", "--json"), world["env"]),
                            cwd=ROOT, env=world["env"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 900
        while cut.ssh(DRILL_TABLES).stdout.strip() in ("", "0"):
            assert time.monotonic() < deadline, "the drill never injected its rules"
            assert proc.poll() is None, "the drill ended before its rules went in"
            time.sleep(0.5)
        # Every host's rules go in before the inject step ends: wait for the detect step.
        path = next((Path(world["env"]["NET_OPS_STATE"]) / "drills").glob("*/journal.json"))
        while not any(s["name"] == "detect" for s in json.loads(path.read_text())["steps"]):
            assert time.monotonic() < deadline, "the drill never reached its detect step"
            time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    left = drill_tables(world)
    assert left["authority-1"] == 1 and sum(left.values()) == len(NODE_HOSTS), left
    started = time.monotonic()
    resumed = _run(drill_argv(world, "--resume", "--json"), world["env"], timeout=1200)
    _timed("drill partition killed, then --resume", started)
    assert resumed.returncode == 0, _out(resumed)
    previous = json.loads(resumed.stdout)["previous"]
    # Killed in its detect step: restored (completed had it recorded the stall just before).
    assert previous["status"] in ("restored", "completed"), previous
    assert previous["recover_s"] is not None, previous
    assert drill_tables(world) == dict.fromkeys(NODE_HOSTS, 0)
    wait_public_finality(world)


def test_authority_down_drill_stalls_finality_until_the_authority_is_back(world):
    """`drill authority-down`: authority-1's unit stopped over SSH, FinalityStalled fires in
    Alertmanager on services-0 (GRANDPA needs both authorities), the unit started, finality
    advances and the alert resolves."""
    report = run_drill(world, "authority-down")
    assert report["scenario"]["alert"]["alertname"] == "FinalityStalled", report
    assert report["scenario"]["fault"]["hosts"] == ["authority-1"], report["scenario"]
    assert report["blocks"]["finalized_after"] > report["blocks"]["finalized_before"], report
    authority = world["fleet"].by_name(machine_of("authority-1"))
    assert authority.ssh("systemctl is-active net-node").stdout.strip() == "active"


def test_rpc_down_drill_fires_the_public_endpoint_alert(world):
    """`drill rpc-down`: rpc-0's node (behind the public endpoint on its machine's edge)
    stopped; the blackbox probe of the public RPC fails through the edge and
    PublicEndpointDown{job="public_rpc"} fires; the node started, it resolves."""
    report = run_drill(world, "rpc-down")
    assert report["scenario"]["alert"] == {
        "alertname": "PublicEndpointDown", "labels": {"job": "public_rpc"}}, report
    assert report["scenario"]["fault"]["hosts"] == ["rpc-0"], report["scenario"]
    wait_public_finality(world)


def test_faucet_drain_drill_fires_few_drips_left_and_refills(world):
    """`drill faucet-drain`: the faucet's balance moved on chain to a throwaway account of the
    drill but for half the alert's threshold in drips (its seed from the test inventory:
    faucet_seed as a plain value), FaucetFewDripsLeft{host="faucet-0"} fires, the balance is
    moved back and it resolves; drips work throughout."""
    report = run_drill(world, "faucet-drain")
    assert report["scenario"]["alert"] == {
        "alertname": "FaucetFewDripsLeft", "labels": {"host": "faucet-0"}}, report
    assert not list((Path(world["env"]["NET_OPS_STATE"]) / "drills").glob("*/faucet-drain-*"))
    status, drip = edge(world, "faucet", "/drip-public", {"recipient": DRIP_RECIPIENT},
                        timeout=120)
    assert status == 200 and drip["recipient"] == DRIP_RECIPIENT, drip


def test_service_down_drill_fires_and_resolves_its_alert_through_the_shapes_monitoring(world):
    """`ops-tools drill service-down faucet` stops the faucet's unit over SSH, sees
    ServiceNotReady fire in Alertmanager on services-0 (forwarded over SSH), starts the faucet
    again and sees the alert resolve."""
    report = run_drill(world, "service-down", "faucet")
    assert report["scenario"]["alert"] == {
        "alertname": "ServiceNotReady", "labels": {"host": "faucet-0"}}, report
    services = world["fleet"].by_name(SERVICES_MACHINE)
    assert services.ssh("systemctl is-active net-faucet").stdout.strip() == "active"
    assert service_genesis(world, "faucet-0") == public_genesis(world)

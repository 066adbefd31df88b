"""Static checks: ansible-lint, syntax of every playbook with both inventories, and the shape of
the inventories (the local network's documented ports, the testnet's hosts)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from tests.ansible.conftest import ROOT, VENV_BIN, run, tail

# Starts processes (tests/process_lane.py), none of them racing a clock: make test runs these
# beside the workers at the lowest priority (scripts/test-lanes).
pytestmark = [pytest.mark.process, pytest.mark.idle]

PLAYBOOKS = ["site.yml", "status.yml", "docs.yml"]
INVENTORIES = ["local", "testnet"]


# About 80 CPU-s, taken from the moments the other tests leave the processors idle.
@pytest.mark.timeout(1500)
def test_ansible_lint_is_clean() -> None:
    """Every role, playbook and inventory, and the molecule playbooks shared by the scenarios."""
    targets = sorted(f"roles/{p.name}" for p in (ROOT / "roles").iterdir() if p.is_dir())
    targets += sorted(f"playbooks/{p.name}" for p in (ROOT / "playbooks").glob("*.yml"))
    targets += ["inventories", "tests/ansible/molecule"]
    proc = run([str(VENV_BIN / "ansible-lint"), "--nocolor", "-f", "pep8", *targets], timeout=1200)
    assert proc.returncode == 0, tail(proc)


@pytest.mark.parametrize("inventory", INVENTORIES)
@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_syntax_check(playbook: str, inventory: str) -> None:
    proc = run(
        [
            str(VENV_BIN / "ansible-playbook"),
            "-i",
            f"inventories/{inventory}",
            f"playbooks/{playbook}",
            "--syntax-check",
        ]
    )
    assert proc.returncode == 0, tail(proc)


@functools.cache
def _inventory(name: str) -> dict:
    proc = run([str(VENV_BIN / "ansible-inventory"), "-i", f"inventories/{name}", "--list"])
    assert proc.returncode == 0, tail(proc)
    return json.loads(proc.stdout)


def test_local_inventory_has_the_documented_hosts_and_ports() -> None:
    inv = _inventory("local")
    hostvars = inv["_meta"]["hostvars"]
    assert inv["authorities"]["hosts"] == ["authority-0", "authority-1"]
    assert inv["rpc_nodes"]["hosts"] == ["rpc-0"]
    nodes = inv["authorities"]["hosts"] + inv["rpc_nodes"]["hosts"]
    ports = {
        h: (v["node_rpc_port"], v["node_p2p_port"], v["node_prometheus_port"])
        for h, v in hostvars.items() if h in nodes
    }
    assert ports == {
        "authority-0": (9945, 30333, 9615),
        "authority-1": (9946, 30334, 9616),
        "rpc-0": (9944, 30335, 9617),
    }
    assert {v["ansible_connection"] for v in hostvars.values()} == {"local"}
    assert {v["net_service_manager"] for v in hostvars.values()} == {"supervisor"}
    assert inv["docs"]["hosts"] == ["docs-0"]
    docs = hostvars["docs-0"]
    assert (docs["docs_listen_address"], docs["docs_port"]) == ("127.0.0.1", 8080)
    assert docs["net_public_endpoints"]["docs_url"] == "http://127.0.0.1:8080"


def test_testnet_inventory_has_the_public_networks_shape() -> None:
    inv = _inventory("testnet")
    assert sorted(inv["authorities"]["hosts"]) == ["authority-0", "authority-1"]
    assert inv["rpc_nodes"]["hosts"] == ["rpc-0", "services-node-0"]
    assert inv["docs"]["hosts"] == ["docs-0"]
    docs = inv["_meta"]["hostvars"]["docs-0"]
    assert docs["ansible_host"] == "services-0.testnet.invalid"
    assert docs["docs_tls"] is True and docs["docs_public_hostname"]
    assert docs["net_public_endpoints"]["docs_url"] == "https://" + docs["docs_public_hostname"]
    rpc = inv["_meta"]["hostvars"]["rpc-0"]
    assert rpc["net_service_manager"] == "systemd"
    # nginx with TLS in front is roles/edge on the RPC node's machine, for the public URL's host
    # and its alias.
    assert rpc["rpc_methods"] == "safe"
    assert sorted(inv["edge"]["hosts"]) == ["edge-rpc-0", "edge-services-0"]
    edge_rpc = inv["_meta"]["hostvars"]["edge-rpc-0"]
    assert edge_rpc["ansible_host"] == rpc["ansible_host"]
    assert edge_rpc["edge_site_names"] == ["rpc"]
    # The services machine's node is no public endpoint: no edge site on it names the RPC.
    services_node = inv["_meta"]["hostvars"]["services-node-0"]
    assert all("rpc" not in inv["_meta"]["hostvars"][e]["edge_site_names"]
               for e in inv["edge"]["hosts"]
               if inv["_meta"]["hostvars"][e]["ansible_host"] == services_node["ansible_host"])
    authority = inv["_meta"]["hostvars"]["authority-0"]
    # Secrets are references into the vault, never values in the repository.
    assert "vault_" in authority["authority_aura_suri"]
    assert "vault_" in authority["node_key_secret"]
    assert (ROOT / "inventories/testnet/group_vars/authorities/vault.yml.example").is_file()
    # The limits' salts too: one secret for every instance on a database, never per host.
    for service, host in (("faucet", "faucet-0"), ("attestation", "attestation-0")):
        salt = inv["_meta"]["hostvars"][host][f"{service}_salt"]
        assert salt == f"{{{{ vault_{service}_salt }}}}"
        example = ROOT / f"inventories/testnet/group_vars/{service}/vault.yml.example"
        assert f"vault_{service}_salt:" in example.read_text()
    # The gateway's list of every worker is not published (operators read their own, signed).
    gateway_site = inv["_meta"]["hostvars"]["edge-services-0"]["edge_site_catalog"]["gateway"]
    assert gateway_site["hidden_paths"] == ["~ ^/v1/workers/?$"]
    # Nor is the indexer's GraphiQL page (the edge publishes /graphql, the page with it).
    defaults = yaml.safe_load((ROOT / "roles/indexer/defaults/main.yml").read_text())
    indexer = inv["_meta"]["hostvars"]["indexer-0"]
    assert indexer.get("indexer_graphql_ide", defaults["indexer_graphql_ide"]) is False


def _machine(hostvars: dict) -> str:
    local = hostvars.get("ansible_connection") == "local"
    return "controller" if local else hostvars["ansible_host"]


@pytest.mark.parametrize("inventory", INVENTORIES)
def test_every_service_reaches_a_node_on_its_own_machine(inventory: str) -> None:
    """Each service's net_rpc_url is a node's RPC on the service's machine, on loopback: no node
    RPC (unsafe methods included, on an authority) has to listen on a network for them."""
    inv = _inventory(inventory)
    hostvars = inv["_meta"]["hostvars"]
    nodes = inv["authorities"]["hosts"] + inv["rpc_nodes"]["hosts"]
    node_ports = {(_machine(hostvars[n]), int(hostvars[n]["node_rpc_port"])) for n in nodes}
    services = [h for h in hostvars if "net_rpc_url" in hostvars[h] and h not in nodes]
    assert services, "no service host sets net_rpc_url"
    for host in services:
        url = urlsplit(hostvars[host]["net_rpc_url"])
        assert url.hostname == "127.0.0.1", (host, url.geturl())
        assert (_machine(hostvars[host]), url.port) in node_ports, (host, url.geturl())
    assert not any(hostvars[n].get("rpc_external") for n in nodes)


def _shadowed_vars_files(group_vars: Path) -> set[str]:
    """Groups with both group_vars/<group>/ and group_vars/<group>.yml: Ansible reads the
    directory and ignores the file (a vault file put in the directory would silently drop every
    variable of the file)."""
    dirs = {p.name for p in group_vars.iterdir() if p.is_dir()}
    return dirs & {p.stem for p in group_vars.glob("*.yml")}


@pytest.mark.parametrize("inventory", sorted(p.name for p in (ROOT / "inventories").iterdir()))
def test_no_group_has_both_a_vars_file_and_a_vars_directory(inventory: str) -> None:
    group_vars = ROOT / "inventories" / inventory / "group_vars"
    shadowed = _shadowed_vars_files(group_vars)
    assert not shadowed, f"{group_vars}: both <group>.yml and <group>/ for {shadowed}"


def test_a_vars_file_beside_a_vars_directory_is_found_and_ansible_ignores_it(tmp_path) -> None:
    """What the check above guards against, shown with Ansible itself."""
    (tmp_path / "group_vars" / "g").mkdir(parents=True)
    (tmp_path / "hosts.yml").write_text("all:\n  children:\n    g:\n      hosts:\n        h1: {}\n")
    (tmp_path / "group_vars" / "g.yml").write_text("from_file: 1\n")
    (tmp_path / "group_vars" / "g" / "vault.yml").write_text("from_dir: 2\n")
    assert _shadowed_vars_files(tmp_path / "group_vars") == {"g"}
    proc = run([str(VENV_BIN / "ansible-inventory"), "-i", str(tmp_path), "--host", "h1"])
    assert proc.returncode == 0, tail(proc)
    assert json.loads(proc.stdout) == {"from_dir": 2}

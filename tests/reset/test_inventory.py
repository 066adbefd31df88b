"""The inventory read in process must be exactly what ``ansible-inventory --list`` prints."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ops_tools.deploy.inventory import (
    _from_listing,
    _list_in_process,
    _list_with_subprocess,
    load_inventory,
)
from ops_tools.errors import OpsError
from tests.conftest import ROOT

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

VAULT = Path(sys.executable).with_name("ansible-vault")


def views(path: Path) -> tuple[dict, dict]:
    """(hosts of every group, every host's variables) by both routes."""
    in_process = _list_in_process(path)
    assert in_process is not None, "the in-process route fell back to the subprocess"
    out = []
    for listing in (in_process, _list_with_subprocess(path)):
        inv = _from_listing(path, listing)
        names = set(in_process) | set(listing)
        out.append(({g: inv.hosts(g) for g in sorted(names - {"_meta"})}, inv.hostvars))
    return out[0], out[1]


@pytest.mark.parametrize("name", ["local", "testnet", "operator"])
def test_project_inventories_read_the_same_in_process(name):
    in_process, reference = views(ROOT / "inventories" / name)
    assert in_process == reference
    assert in_process[1], "no host variables at all"


def encrypt(tmp_path: Path, secret: str) -> str:
    password = tmp_path / "vault-pass"
    password.write_text("not-a-real-password\n")
    proc = subprocess.run(
        [str(VAULT), "encrypt_string", "--vault-password-file", str(password), secret],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    return proc.stdout


def test_host_vars_group_precedence_and_vault_values_read_the_same(tmp_path):
    inv = tmp_path / "inv"
    (inv / "group_vars" / "authorities").mkdir(parents=True)
    (inv / "host_vars").mkdir()
    (inv / "hosts.yml").write_text(
        "all:\n  children:\n    nodes:\n      children:\n        authorities:\n"
        "          hosts:\n            a-0: {node_rpc_port: 9945}\n            a-1: {}\n"
        "        rpc_nodes:\n          hosts:\n            r-0: {}\n"
    )
    (inv / "group_vars" / "all.yml").write_text(
        "level: all\nnode_rpc_port: 9944\nsecret_ref: '{{ vault_node_keys[inventory_hostname] }}'\n"
    )
    # A vault-encrypted value: no secret is configured, so it must stay encrypted, unchanged.
    (inv / "group_vars" / "authorities" / "main.yml").write_text(
        "level: authorities\nvault_node_keys:\n  a-0: "
        + encrypt(tmp_path, "k0").replace("\n", "\n    ").rstrip()
        + "\n"
    )
    (inv / "host_vars" / "a-1.yml").write_text("level: host\nnode_rpc_port: 9946\n")
    in_process, reference = views(inv)
    assert in_process == reference
    hostvars = in_process[1]
    assert [hostvars[h]["level"] for h in ("a-0", "a-1", "r-0")] == ["authorities", "host", "all"]
    assert [hostvars[h]["node_rpc_port"] for h in ("a-0", "a-1", "r-0")] == [9945, 9946, 9944]
    assert hostvars["r-0"]["secret_ref"] == "{{ vault_node_keys[inventory_hostname] }}"
    assert "k0" not in str(hostvars["a-0"]["vault_node_keys"])
    assert in_process[0]["authorities"] == ["a-0", "a-1"] and in_process[0]["nodes"] == [
        "a-0",
        "a-1",
        "r-0",
    ]


def test_an_inventory_ansible_rejects_gives_ansibles_error(tmp_path):
    inv = tmp_path / "inv"
    (inv / "group_vars").mkdir(parents=True)
    (inv / "hosts.yml").write_text("all:\n  hosts:\n    h-0: {}\n")
    # A whole-file vault with no secret to open it: Ansible refuses to read the inventory.
    password = tmp_path / "vault-pass"
    password.write_text("not-a-real-password\n")
    secret = inv / "group_vars" / "all.yml"
    secret.write_text("key: value\n")
    subprocess.run(
        [str(VAULT), "encrypt", "--vault-password-file", str(password), str(secret)],
        capture_output=True,
        check=True,
        cwd=tmp_path,
    )
    with pytest.raises(OpsError, match=r"inventory .*inv: ansible-inventory failed: .*"):
        load_inventory(inv)

"""How a remote drill reaches a machine: the ssh command line from the inventory's connection
variables (pure), and the inputs it refuses. The commands over it run in
tests/hosts/test_testnet_shape.py's partition drill."""

from __future__ import annotations

import pytest

from ops_tools.deploy.ssh import Machine
from ops_tools.errors import InputError

HOSTVARS = {
    "ansible_host": "10.77.3.2", "ansible_port": 22, "ansible_user": "deploy",
    "ansible_ssh_private_key_file": "/keys/id_ed25519",
    "ansible_ssh_common_args": "-o UserKnownHostsFile=/keys/known_hosts"
                               " -o StrictHostKeyChecking=yes",
}


def test_the_inventory_variables_make_the_ssh_command():
    m = Machine.of("authority-0", HOSTVARS)
    argv = m.argv("-N")
    assert argv[0] == "ssh" and argv[-1] == "10.77.3.2" and argv[-2] == "-N"
    assert argv[1:3] == ["-o", "BatchMode=yes"]  # never a prompt for a password or a host key
    assert argv[argv.index("-i"):argv.index("-i") + 2] == ["-i", "/keys/id_ed25519"]
    assert argv[argv.index("-l"):argv.index("-l") + 2] == ["-l", "deploy"]
    assert "StrictHostKeyChecking=yes" in argv and "UserKnownHostsFile=/keys/known_hosts" in argv
    # Inventory hosts on one machine share it (services-node-0 and monitoring-0 on services-0).
    assert Machine.of("monitoring-0", HOSTVARS).key == m.key


def test_a_host_without_ansible_host_is_reached_by_its_name():
    m = Machine.of("rpc-0.example.org", {})
    assert m.argv()[-1] == "rpc-0.example.org" and "-l" not in m.argv()


@pytest.mark.parametrize(("key", "value", "match"), [
    ("ansible_port", "22; rm -rf /", "is not a TCP port"),
    ("ansible_port", 70000, "is not a TCP port"),
    ("ansible_user", "{{ vault_user }}", "is templated"),
    ("ansible_connection", "local", "reached over 'local'"),
])
def test_bad_connection_variables_are_refused(key, value, match):
    with pytest.raises(InputError, match=match):
        Machine.of("authority-0", {**HOSTVARS, key: value})

"""The preflight of ``localnet up``: the node ports of the inventory, and which are taken."""

from __future__ import annotations

import socket
from pathlib import Path

from ops_tools.deploy import port_check
from ops_tools.deploy.inventory import Inventory

INV = Inventory(
    path=Path("inventories/local"),
    groups={"authorities": ["authority-0"], "rpc_nodes": ["rpc-0"], "faucet": ["faucet-0"]},
    hostvars={
        "authority-0": {"node_rpc_port": 9945, "node_p2p_port": 30333, "other": 1},
        "rpc-0": {"node_rpc_port": 9944, "node_prometheus_port": "9617", "node_p2p_port": True},
        "faucet-0": {},
    },
)


def test_node_ports_are_the_integer_node_ports_the_inventory_sets():
    assert port_check.node_ports(INV) == [
        port_check.HostPort("authority-0", "node_rpc_port", 9945),
        port_check.HostPort("authority-0", "node_p2p_port", 30333),
        port_check.HostPort("rpc-0", "node_rpc_port", 9944),
    ]


def test_taken_lists_the_ports_that_are_not_free_and_the_message_names_them():
    busy = port_check.taken(port_check.node_ports(INV), is_free=lambda port: port != 9944)
    assert busy == [port_check.HostPort("rpc-0", "node_rpc_port", 9944)]
    message = port_check.conflict_message(busy, "/var/lib/net/localnet", "inventories/local")
    assert "9944 (rpc-0's node_rpc_port)" in message
    assert "/var/lib/net/localnet" in message and "another network on the same ports" in message


def test_a_listener_makes_its_port_taken_and_a_closed_one_frees_it():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    try:
        assert port_check.bind_free(port) is False
    finally:
        listener.close()
    assert port_check.bind_free(port) is True

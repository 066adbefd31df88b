"""JSON-RPC edge cases, subscriptions, method policy and metrics of a running node."""

from __future__ import annotations

import json

import pytest
import requests
import websocket

from ops_tools.chain.status import wait_for
from tests.devnode.conftest import Node


def post_raw(node: Node, body: bytes | str) -> requests.Response:
    return requests.post(
        node.http, data=body, headers={"Content-Type": "application/json"}, timeout=10
    )


def test_malformed_requests_get_json_rpc_errors_and_the_node_keeps_serving(node):
    assert post_raw(node, b"{not json").json()["error"]["code"] == -32700
    assert post_raw(
        node, json.dumps({"jsonrpc": "2.0", "id": 3, "method": "no_suchMethod", "params": []})
    ).json() == {
        "jsonrpc": "2.0",
        "error": {"code": -32601, "message": "Method not found"},
        "id": 3,
    }
    wrong = post_raw(
        node,
        json.dumps(
            {"jsonrpc": "2.0", "id": 4, "method": "chain_getBlockHash", "params": ["not-a-number"]}
        ),
    ).json()
    assert wrong["error"]["code"] == -32602 and wrong["id"] == 4
    wrong_type = post_raw(
        node, json.dumps({"jsonrpc": "2.0", "id": 5, "method": "state_getStorage", "params": [42]})
    ).json()
    assert wrong_type["error"]["code"] == -32602
    assert (
        post_raw(node, json.dumps({"id": 6, "method": "system_name"})).json()["error"]["code"]
        == -32600
    )
    big = post_raw(
        node,
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "system_name",
                "params": ["x" * (16 * 1024 * 1024)],
            }
        ),
    )
    assert big.status_code == 413 and big.json()["error"]["code"] == -32007
    batch = post_raw(
        node,
        json.dumps(
            [
                {"jsonrpc": "2.0", "id": 1, "method": "system_name"},
                {"jsonrpc": "2.0", "id": 2, "method": "nope"},
            ]
        ),
    ).json()
    assert batch[0]["result"] == "devnode" and batch[1]["error"]["code"] == -32601
    assert node.call("system_name") == "devnode"
    ws = websocket.create_connection(node.ws, timeout=10)
    try:
        ws.send("]]]")
        assert json.loads(ws.recv())["error"]["code"] == -32700
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 9, "method": "system_chain", "params": []}))
        assert json.loads(ws.recv())["result"] == "Test test_net"
    finally:
        ws.close()


def test_http_refuses_subscriptions(node):
    reply = post_raw(
        node, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "chain_subscribeNewHeads"})
    ).json()
    assert reply["error"]["code"] == -32601


def test_head_subscriptions_over_websocket(node):
    ws = websocket.create_connection(node.ws, timeout=10)
    try:
        ws.send(
            json.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": "chain_subscribeNewHeads", "params": []}
            )
        )
        new_sub = json.loads(ws.recv())["result"]
        ws.send(
            json.dumps(
                {"jsonrpc": "2.0", "id": 2, "method": "chain_subscribeFinalizedHeads", "params": []}
            )
        )
        seen: dict[str, list[int]] = {"chain_newHead": [], "chain_finalizedHead": []}
        fin_sub = None
        while len(seen["chain_newHead"]) < 3 or len(seen["chain_finalizedHead"]) < 2:
            msg = json.loads(ws.recv())
            if msg.get("id") == 2:
                fin_sub = msg["result"]
                continue
            seen[msg["method"]].append(int(msg["params"]["result"]["number"], 16))
            expected = new_sub if msg["method"] == "chain_newHead" else fin_sub
            assert msg["params"]["subscription"] == expected
        assert seen["chain_newHead"] == sorted(seen["chain_newHead"])
        assert seen["chain_newHead"][-1] > seen["chain_newHead"][0]
        ws.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "chain_unsubscribeNewHeads",
                    "params": [new_sub],
                }
            )
        )
        while True:
            msg = json.loads(ws.recv())
            if msg.get("id") == 3:
                assert msg["result"] is True
                break
    finally:
        ws.close()


def test_system_methods(node):
    assert node.call("system_health") == {"peers": 0, "isSyncing": False, "shouldHavePeers": True}
    assert node.call("system_chainType") == "Local"
    assert node.call("system_nodeRoles") == ["Authority"]
    assert node.call("system_localPeerId").startswith("12D3KooW")
    methods = node.call("rpc_methods")["methods"]
    for m in (
        "chain_getFinalizedHead",
        "state_getKeysPaged",
        "author_rotateKeys",
        "system_peers",
        "author_submitAndWatchExtrinsic",
        "state_queryStorageAt",
        "state_call",
    ):
        assert m in methods
    # its own extensions answer but stay unlisted (polkadot.js warns about unknown methods)
    assert not [m for m in methods if m.startswith("devnode_")]
    assert node.call("devnode_blockedPeers") == []
    # Past genesis (which has no justification): a loaded machine may not have finalized #1 yet.
    wait_for("a finalized block past genesis",
             lambda: (int(node.call("chain_getHeader", [node.call("chain_getFinalizedHead")])
                          ["number"], 16) > 0, "finalized head still genesis"), 60)
    block = node.call("chain_getBlock", [node.call("chain_getFinalizedHead")])
    assert block["justifications"][0][0] == list(b"FRNK")


def test_unsafe_methods_on_loopback_under_auto(node):
    keys = node.call("author_rotateKeys")
    assert len(bytes.fromhex(keys[2:])) == 64
    assert node.call("author_hasKey", ["0x" + keys[2:66], "aura"]) is True
    assert node.call("author_hasSessionKeys", [keys]) is True


def test_metrics_use_substrate_names(node):
    node.wait_for(lambda: node.finalized() >= 1, what="finality")
    text = requests.get(f"http://127.0.0.1:{node.prom_port}/metrics", timeout=10).text
    lines = {
        line.split(" ")[0]: int(line.split(" ")[1])
        for line in text.splitlines()
        if line and line[0] != "#"
    }
    best = lines['substrate_block_height{status="best",chain="test_net"}']
    assert best >= 1
    assert lines['substrate_block_height{status="finalized",chain="test_net"}'] >= 1
    assert lines['substrate_sub_libp2p_peers_count{chain="test_net"}'] == 0
    assert lines['substrate_ready_transactions_number{chain="test_net"}'] >= 0
    # The genesis it serves, for the monitoring's NodesOnDifferentGenesis.
    genesis = node.call("chain_getBlockHash", [0])
    assert lines[f'net_node_genesis_info{{genesis_hash="{genesis}",chain="test_net"}}'] == 1


@pytest.fixture
def safe_node(tmp_path, raw_spec):
    n = Node(
        tmp_path / "base",
        str(raw_spec),
        "--rpc-methods",
        "safe",
        "--no-prometheus",
        validator_key=None,
    )
    n.start()
    try:
        yield n
    finally:
        n.stop()


def test_safe_mode_refuses_unsafe_methods(safe_node):
    for method, params in (
        ("author_rotateKeys", []),
        ("system_peers", []),
        ("author_insertKey", ["aura", "//Alice", "0x" + "00" * 32]),
    ):
        reply = post_raw(
            safe_node, json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        ).json()
        assert reply["error"] == {
            "code": -32601,
            "message": "RPC call is unsafe to be called externally",
        }
    assert safe_node.call("system_nodeRoles") == ["Full"]
    assert not (safe_node.base / "chains" / "test_net" / "keystore").exists()

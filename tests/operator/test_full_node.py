"""playbooks/full_node.yml end to end over SSH (paramiko to an sshd on a loopback address): the
full node syncs from the network's authorities, a second run changes nothing, and after a reset
of the network a re-run moves the node to the new genesis with the same peer id."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import yaml

from tests.operator.conftest import (
    DEVNODE,
    HOST,
    ArtifactServer,
    LocalNet,
    Operator,
    PlayResult,
    Rendered,
    rpc,
    wait_for,
)


def report(result: PlayResult) -> dict:
    """The play's final report as the operator sees it (the debug task's YAML block)."""
    block = result.stdout.split("TASK [Report the full node]", 1)[1].split("\n\n", 1)[0]
    body = block.split(f"ok: [{HOST}] =>", 1)[1]
    return yaml.safe_load(body)["msg"]


def assert_ok(result: PlayResult) -> None:
    assert result.rc == 0, result.output
    assert result.recap[HOST]["failed"] == 0 and result.recap[HOST]["unreachable"] == 0


def head(url: str) -> int:
    return int(rpc(url, "chain_getHeader")["number"], 16)


@pytest.mark.slow
def test_full_node_syncs_stays_idempotent_and_follows_a_network_reset(
    specs: dict[str, Rendered], localnet: LocalNet, operator: Operator, artifacts: ArtifactServer
):
    current, other = specs["current"], specs["other"]
    localnet.start(current)
    # The first deployment downloads both artifacts, as an operator does.
    published = {
        "genesis_preflight_binary_src": artifacts.publish(DEVNODE, "v1/net-node"),
        "genesis_preflight_chainspec_src": artifacts.publish(current.raw, "v1/raw.json"),
    }

    first = operator.play(current, localnet.rpc_url, localnet.bootnodes, **published)
    assert_ok(first)
    assert first.recap[HOST]["changed"] > 0
    shown = report(first)
    peer_id = rpc(operator.rpc_url, "system_localPeerId")
    assert shown["peer_id"] == peer_id
    assert shown["peers"] >= 1
    assert shown["best_block"] >= 1 and shown["best_block"] >= shown["finalized_block"]
    assert shown["genesis_check"] == "match"
    assert shown["genesis_of_spec_offline"] == current.genesis
    assert shown["genesis_of_public_node"] == current.genesis
    assert shown["genesis_served_by_node"] == current.genesis
    assert shown["public_node"] == localnet.rpc_url

    # The node follows the network's tip, from the authorities it was pointed at.
    assert rpc(operator.rpc_url, "chain_getBlockHash", [0]) == current.genesis
    tip = head(localnet.http())
    wait_for(lambda: head(operator.rpc_url) >= tip, 120, "the full node to reach the network's tip")
    # Interface flags, RPC on loopback, a node key that stayed on the host (0600, never logged).
    manifest = json.loads((operator.node_root / "deployed.json").read_text())
    assert manifest["role"] == "full" and manifest["genesis_hash"] == current.genesis
    assert manifest["peer_id"] == peer_id
    node_key = Path(manifest["node_key_path"])
    assert node_key.is_relative_to(operator.node_root)
    assert node_key.stat().st_mode & 0o777 == 0o600
    assert node_key.read_text().strip() not in first.output
    program = next((operator.supervisor_root / "conf.d").glob("*.conf")).read_text()
    for flag in ("--chain", "--base-path", "--name", "--rpc-port", "--port"):
        assert f" {flag} " in program
    assert "--rpc-external" not in program
    with pytest.raises(OSError):  # bound to 127.0.0.1 only, not to every address
        socket.create_connection(("127.0.0.2", operator.rpc_port), timeout=2).close()

    second = operator.play(current, localnet.rpc_url, localnet.bootnodes, **published)
    assert_ok(second)
    assert second.recap[HOST]["changed"] == 0, second.stdout

    # A network reset: the authorities restart from a spec of another genesis.
    localnet.stop()
    localnet.start(other)
    stale = operator.play(current, localnet.rpc_url, localnet.bootnodes)
    assert stale.rc != 0 and "genesis mismatch" in stale.output  # the old spec is refused
    untouched = json.loads((operator.node_root / "deployed.json").read_text())
    assert untouched == manifest  # ... before anything on the host changed

    # The operator takes the network's new raw spec (a local path this time).
    moved = operator.play(other, localnet.rpc_url, localnet.bootnodes)
    assert_ok(moved)
    assert rpc(operator.rpc_url, "chain_getBlockHash", [0]) == other.genesis
    assert rpc(operator.rpc_url, "system_localPeerId") == peer_id  # node key kept
    assert report(moved)["genesis_served_by_node"] == other.genesis
    manifest = json.loads((operator.node_root / "deployed.json").read_text())
    assert manifest["genesis_hash"] == other.genesis
    tip = head(localnet.http())
    wait_for(lambda: head(operator.rpc_url) >= tip, 120, "the full node to reach the new tip")

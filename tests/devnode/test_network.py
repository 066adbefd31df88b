"""Several devnode processes on loopback: two authorities and a full node, sync, refusal."""

from __future__ import annotations

import hashlib
import time
from itertools import pairwise
from pathlib import Path

import pytest
import requests

from tests.devnode.conftest import Node, make_plain_spec
from tests.support.devnode import raw_spec as raw_of

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

ALICE_AURA = "d43593c715fdd31c61141abd04a99fd6822c8558854ccde39a5684e7a56da27d"


def bootnode(node: Node) -> str:
    return node.bootnode()


def slot_of(header: dict) -> int:
    pre = next(log for log in header["digest"]["logs"] if log.startswith("0x06"))
    return int.from_bytes(bytes.fromhex(pre[2 + 2 + 8 + 2 :][:16]), "little")


def author_index(header: dict) -> int:
    return slot_of(header) % 2


@pytest.fixture(scope="module")
def two_spec(tmp_path_factory) -> Path:
    plain = make_plain_spec(
        tmp_path_factory.mktemp("two") / "two.json",
        chain_id="two_net",
        authorities=("Alice", "Bob"),
    )
    return raw_of(plain)


@pytest.fixture(scope="module")
def network(tmp_path_factory, two_spec):
    root = tmp_path_factory.mktemp("net")
    alice = Node(root / "alice", str(two_spec), name="alice", validator_key="alice").start()
    started = [alice]
    try:
        bob = Node(
            root / "bob",
            str(two_spec),
            "--bootnodes",
            bootnode(alice),
            name="bob",
            validator_key="bob",
        ).start()
        started.append(bob)
        full = Node(
            root / "full",
            str(two_spec),
            "--bootnodes",
            bootnode(alice),
            bootnode(bob),
            name="full",
            validator_key=None,
        ).start()
        started.append(full)
        yield alice, bob, full
    finally:
        for n in started:
            n.stop()


def headers(node: Node, numbers: range) -> list[dict]:
    return [node.call("chain_getHeader", [node.call("chain_getBlockHash", [n])]) for n in numbers]


def test_two_authorities_alternate_and_finalize_and_the_full_node_agrees(network):
    alice, bob, full = network
    full.wait_for(lambda: full.finalized() >= 8, timeout=60, what="finality on the full node")
    assert full.call("system_health") == {"peers": 2, "isSyncing": False, "shouldHavePeers": True}
    peers = full.call("system_peers")
    assert sorted(p["roles"] for p in peers) == ["AUTHORITY", "AUTHORITY"]
    assert full.call("system_nodeRoles") == ["Full"]
    chain = headers(full, range(1, 9))
    assert {author_index(h) for h in chain} == {0, 1}
    for prev, cur in pairwise(chain):
        if slot_of(cur) == slot_of(prev) + 1:
            assert author_index(cur) != author_index(prev)
    fin = min(n.finalized() for n in network)
    assert fin >= 8
    for n in (alice, bob):
        assert n.call("chain_getBlockHash", [0]) == full.call("chain_getBlockHash", [0])
        assert n.call("chain_getBlockHash", [fin]) == full.call("chain_getBlockHash", [fin])
    # The full node serves the same best head as the authorities once they agree on one.
    full.wait_for(
        lambda: len({n.call("chain_getHeader")["parentHash"] for n in network}) == 1,
        timeout=20,
        what="the same best block on all three nodes",
    )
    metrics = requests.get(f"http://127.0.0.1:{full.prom_port}/metrics", timeout=5).text
    assert 'substrate_sub_libp2p_peers_count{chain="two_net"} 2' in metrics


def test_transaction_sent_to_the_full_node_is_gossiped_and_included(network):
    from substrateinterface import Keypair, SubstrateInterface

    _, _, full = network
    s = SubstrateInterface(url=full.ws)
    try:
        bob = Keypair.create_from_uri("//Bob")
        call = s.compose_call(
            "Balances", "transfer_keep_alive", {"dest": bob.ss58_address, "value": 4242}
        )
        xt = s.create_signed_extrinsic(call, Keypair.create_from_uri("//Charlie"))
        receipt = s.submit_extrinsic(xt, wait_for_inclusion=True)
        assert receipt.is_success
        assert receipt.extrinsic_hash in [
            "0x" + hashlib.blake2b(bytes.fromhex(x[2:]), digest_size=32).hexdigest()
            for x in full.call("chain_getBlock", [receipt.block_hash])["block"]["extrinsics"]
        ]
    finally:
        s.close()


def test_one_authority_down_stalls_finality_then_recovers(network):
    alice, bob, full = network
    bob.stop()
    alice.wait_for(lambda: alice.call("system_health")["peers"] == 1, what="alice to see bob gone")
    time.sleep(1.5)  # let the last votes that bob sent settle
    stalled = alice.finalized()
    best_at_stop = alice.best()
    alice.wait_for(
        lambda: alice.best() >= best_at_stop + 4, timeout=30, what="blocks from alice alone"
    )
    assert alice.finalized() == stalled
    assert full.finalized() <= stalled
    new = headers(alice, range(best_at_stop + 1, alice.best() + 1))
    assert all(author_index(h) == 0 for h in new)  # only alice's slots: half the rate
    for prev, cur in pairwise(new):
        assert slot_of(cur) - slot_of(prev) >= 2
    bob.start()
    bob.wait_for(lambda: bob.best() >= alice.best() - 1, timeout=60, what="bob to sync")
    alice.wait_for(lambda: alice.finalized() > stalled + 2, timeout=60, what="finality to resume")
    full.wait_for(
        lambda: full.finalized() > stalled + 2, timeout=60, what="finality on the full node"
    )
    assert bob.call("chain_getBlockHash", [stalled + 1]) == alice.call(
        "chain_getBlockHash", [stalled + 1]
    )


def test_a_removed_reserved_peer_is_refused_both_ways_until_added_again(network):
    alice, bob, full = network
    bob.wait_for(lambda: bob.call("system_health")["peers"] == 2, timeout=60, what="bob's peers")
    others = {n.call("system_localPeerId"): n for n in (alice, full)}
    for peer in others:
        assert bob.call("system_removeReservedPeer", [peer]) is None
    assert bob.call("devnode_blockedPeers") == sorted(others)
    bob.wait_for(lambda: bob.call("system_health")["peers"] == 0, what="bob cut off")
    # alice and the full node keep dialling bob (it is their bootnode); he keeps refusing.
    time.sleep(5)
    assert bob.call("system_health")["peers"] == 0
    stalled = alice.finalized()
    alice.wait_for(lambda: alice.best() > stalled + 4, timeout=30, what="alice's blocks alone")
    assert alice.finalized() == stalled
    for node in others.values():
        assert bob.call("system_addReservedPeer", [node.bootnode()]) is None
    assert bob.call("devnode_blockedPeers") == []
    bob.wait_for(lambda: bob.call("system_health")["peers"] == 2, timeout=60, what="bob back")
    alice.wait_for(lambda: alice.finalized() > stalled + 2, timeout=60, what="finality to resume")


def test_removing_a_peer_needs_a_peer_id(network):
    _, bob, _ = network
    with pytest.raises(RuntimeError, match="expected a peer id"):
        bob.call("system_removeReservedPeer", [42])


def test_node_of_another_genesis_is_refused(network, tmp_path):
    alice, _, _ = network
    other = make_plain_spec(
        tmp_path / "other.json", chain_id="two_net", authorities=("Alice", "Bob"), epoch_length=77
    )
    stranger = Node(
        tmp_path / "stranger",
        str(raw_of(other)),
        "--bootnodes",
        bootnode(alice),
        name="stranger",
        validator_key=None,
    ).start()
    try:
        stranger.wait_for(
            lambda: "different genesis" in stranger.logs(), timeout=20, what="the refusal"
        )
        alice.wait_for(
            lambda: "different genesis" in alice.logs(), timeout=10, what="alice's log of it"
        )
        time.sleep(2)
        assert stranger.best() == 0
        assert stranger.call("system_health")["peers"] == 0
        assert stranger.call("system_localPeerId") not in {
            p["peerId"] for p in alice.call("system_peers")
        }
    finally:
        stranger.stop()


@pytest.fixture(scope="module")
def fast_authority(tmp_path_factory):
    """One authority on 50 ms slots, so that hundreds of blocks exist within seconds."""
    root = tmp_path_factory.mktemp("fast")
    spec = raw_of(make_plain_spec(root / "fast.json", chain_id="fast_net", slot_ms=50))
    node = Node(root / "author", str(spec), name="author").start()
    try:
        yield node, spec
    finally:
        node.stop()


@pytest.mark.slow
def test_late_joiner_syncs_to_the_tip(fast_authority, tmp_path):
    author, spec = fast_authority
    author.wait_for(lambda: author.best() >= 200, timeout=120, what="200 blocks")
    joiner = Node(
        tmp_path / "late",
        str(spec),
        "--bootnodes",
        bootnode(author),
        name="late",
        validator_key=None,
    ).start()
    try:
        target = author.best()
        joiner.wait_for(lambda: joiner.best() >= target, timeout=60, what="the late joiner to sync")
        assert joiner.call("chain_getBlockHash", [target]) == author.call(
            "chain_getBlockHash", [target]
        )
        joiner.wait_for(
            lambda: joiner.finalized() >= target, timeout=30, what="finality on the joiner"
        )
    finally:
        joiner.stop()


@pytest.mark.slow
def test_kill_9_during_import_then_restart_recovers(fast_authority, tmp_path):
    import signal

    author, spec = fast_authority
    author.wait_for(lambda: author.best() >= 600, timeout=120, what="600 blocks")
    tip_at_start = author.best()
    victim = Node(
        tmp_path / "victim",
        str(spec),
        "--bootnodes",
        bootnode(author),
        name="victim",
        validator_key=None,
    )
    victim.start()
    victim.wait_for(lambda: victim.best() > 0, timeout=30, what="the sync to start", interval=0.02)
    at_kill = victim.best()
    victim.stop(signal.SIGKILL)
    assert at_kill < tip_at_start  # killed while it was still importing the chain
    victim.start()
    try:
        resumed = victim.best()
        assert resumed >= at_kill  # what RPC reported was committed
        for n in (1, resumed // 2, resumed):
            assert victim.call("chain_getBlockHash", [n]) == author.call("chain_getBlockHash", [n])
        target = author.best()
        victim.wait_for(
            lambda: victim.best() >= target, timeout=60, what="the restarted node to catch up"
        )
        assert victim.call("chain_getBlockHash", [target]) == author.call(
            "chain_getBlockHash", [target]
        )
    finally:
        victim.stop()

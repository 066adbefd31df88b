"""The database survives restarts; purge-chain resets the chain and keeps the keys."""

from __future__ import annotations

from tests.devnode.conftest import Node, run


def test_restart_keeps_the_chain_and_purge_resets_it(tmp_path, raw_spec):
    base = tmp_path / "base"
    node = Node(base, str(raw_spec), "--no-prometheus")
    node.start()
    try:
        node.wait_for(lambda: node.best() >= 3, what="block 3")
        node.call(
            "author_insertKey",
            [
                "gran",
                "//Charlie",
                "0x439660b36c6c03afafca027b910b4fecf99801834c62a5e6006f27d978de234f",
            ],
        )
        genesis = node.call("chain_getBlockHash", [0])
        hash3 = node.call("chain_getBlockHash", [3])
    finally:
        assert node.stop() == 0
    chain_dir = base / "chains" / "test_net"
    keystore_before = sorted(p.name for p in (chain_dir / "keystore").iterdir())
    assert len(keystore_before) == 3  # //Alice aura + gran (--alice), //Charlie gran over RPC

    node.start()
    try:
        assert node.call("chain_getBlockHash", [3]) == hash3
        assert node.best() >= 3
        node.wait_for(lambda: node.best() >= 5, what="blocks after the restart")
    finally:
        node.stop()

    proc = run("purge-chain", "--base-path", str(base), "--chain", str(raw_spec), "-y")
    assert proc.returncode == 0, proc.stderr
    assert not (chain_dir / "db").exists()
    assert sorted(p.name for p in (chain_dir / "keystore").iterdir()) == keystore_before
    node.start()
    try:
        assert node.call("chain_getBlockHash", [0]) == genesis
        node.wait_for(lambda: node.best() >= 3, what="block 3 of the new chain")
        assert node.call("chain_getBlockHash", [3]) != hash3  # other slots, other blocks
    finally:
        node.stop()


def test_database_of_another_genesis_is_refused(tmp_path, raw_spec, plain_spec_path):
    import json

    base = tmp_path / "base"
    node = Node(base, str(raw_spec), "--no-prometheus", validator_key=None)
    node.start()
    node.stop()
    other = json.loads(raw_spec.read_text())
    alt = tmp_path / "alt.json"
    # Same chain id, different genesis: the stored database must not be reused.
    plain = json.loads(plain_spec_path.read_text())
    plain["genesis"]["runtimeGenesis"]["patch"]["operatorStake"]["epochLength"] = 99
    alt.write_text(json.dumps(plain))
    assert other["id"] == plain["id"]
    proc = run("--chain", str(alt), "--base-path", str(base), "--rpc-port", "0", "--no-prometheus")
    assert proc.returncode != 0 and "purge-chain" in proc.stderr and "genesis" in proc.stderr

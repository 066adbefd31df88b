"""What restore decides before it writes, without processes: the network check, the plan's
targets (from the deployment, never from archive names), and the writes themselves."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ops_tools.backup import manifest as mf
from ops_tools.backup import restore, store
from ops_tools.backup.locate import Deployment, NodeSite
from ops_tools.deploy.inventory import Inventory
from ops_tools.errors import InputError, OpsError

GENESIS = "0x" + "ab" * 32
KEY = "61757261" + "11" * 32  # aura + public key


def deployment(tmp_path: Path, genesis: str = GENESIS) -> Deployment:
    root = tmp_path / "authority-0"
    (root / "keystore").mkdir(parents=True)
    manifest = {"genesis_hash": genesis, "chain_id": "net_local",
                "node_key_path": str(root / "node_key"), "keystore_path": str(root / "keystore"),
                "chainspec_path": str(root / "spec.json"),
                "binary": {"path": str(root / "node")}, "rpc_port": 9945,
                "service": {"manager": "supervisor", "name": "net-node-authority-0",
                            "supervisor_conf": str(tmp_path / "supervisord.conf")}}
    inv = Inventory(tmp_path / "inv", {"authorities": ["authority-0"]}, {"authority-0": {}})
    return Deployment(inv, [NodeSite("authority-0", "authority", manifest)], [], [])


def verified(files: dict[str, tuple[str, str | None, bytes, dict]],
             genesis: str = GENESIS) -> store.Verified:
    members = [mf.Member(name, kind, host, data, meta)
               for name, (kind, host, data, meta) in files.items()]
    manifest = mf.build(members, {"genesis_hash": genesis, "chain_id": "net_local"}, "i", "now")
    return store.Verified(Path("/backups/x"), manifest, {m.name: m.data for m in members})


def test_a_backup_of_another_network_is_refused_before_anything_is_planned(tmp_path):
    v = verified({"nodes/authority-0/node_key": ("node_key", "authority-0", b"k", {})},
                 genesis="0x" + "cd" * 32)
    with pytest.raises(InputError, match=r"refusing to write anything\. Point --inventory"):
        restore.plan(v, deployment(tmp_path))


def test_plan_names_each_target_and_what_happens_to_it(tmp_path):
    dep = deployment(tmp_path)
    node = dep.nodes[0]
    node.node_key_path.write_bytes(b"another key")
    (node.keystore_path / KEY).write_bytes(b'"//Alice"')
    node.chainspec_path.write_bytes(b"newer spec")
    v = verified({
        "nodes/authority-0/node_key": ("node_key", "authority-0", b"the key", {}),
        f"nodes/authority-0/keystore/{KEY}": ("keystore", "authority-0", b'"//Alice"', {}),
        "release/chainspec.json": ("release", None, b"old spec", {"file": "chainspec"}),
        "release/node": ("release", None, b"binary", {"file": "binary"}),
        "release/release.json": ("release", None, b"{}", {"file": "info"}),
    })
    p = restore.plan(v, dep)
    changes = {(w.kind, Path(w.target).name): w.change for w in p.writes}
    assert changes == {("node_key", "node_key"): restore.REPLACE,
                       ("keystore", KEY): restore.SAME,
                       ("release", "spec.json"): restore.KEPT,  # never downgraded
                       ("release", "node"): restore.CREATE}
    assert list(p.programs) == ["authority-0"]
    text = "\n".join(p.describe())
    assert f"replace         {node.node_key_path}" in text
    assert "stops and starts again: authority-0" in text


def test_a_keystore_member_with_a_name_that_is_not_a_key_is_refused(tmp_path):
    v = verified({"nodes/authority-0/keystore/authorized_keys":
                  ("keystore", "authority-0", b"ssh-ed25519 AAAA", {})})
    with pytest.raises(mf.ManifestError, match="not a keystore file name"):
        restore.plan(v, deployment(tmp_path))


def test_only_the_named_hosts_and_kinds_are_planned(tmp_path):
    v = verified({"nodes/authority-0/node_key": ("node_key", "authority-0", b"k", {}),
                  "release/node": ("release", None, b"binary", {"file": "binary"})})
    dep = deployment(tmp_path)
    p = restore.plan(v, dep, hosts=["authority-0"], kinds=["keystore"])
    assert p.writes == [] and p.programs == {}
    with pytest.raises(InputError, match="--kind nodekey"):
        restore.plan(v, dep, kinds=["nodekey"])


def test_keys_are_written_0600_and_a_sqlite_restore_drops_the_old_journal(tmp_path):
    keystore = tmp_path / "gone" / "keystore"
    restore._write(restore.Write("m", "keystore", "a", str(keystore / KEY), restore.CREATE),
                   b"secret")
    assert (keystore / KEY).stat().st_mode & 0o777 == 0o600
    assert keystore.stat().st_mode & 0o777 == 0o700
    db = tmp_path / "faucet.db"
    source = tmp_path / "source.db"
    with sqlite3.connect(source) as conn:
        conn.execute("create table t (v text)")
        conn.execute("insert into t values ('restored')")
    conn.close()
    db.write_bytes(b"live")
    Path(f"{db}-wal").write_bytes(b"a journal of the replaced database")
    restore._write(restore.Write("m", "database", "f", str(db), restore.REPLACE, "sqlite"),
                   source.read_bytes())
    assert not Path(f"{db}-wal").exists()
    with sqlite3.connect(db) as conn:
        assert conn.execute("select v from t").fetchall() == [("restored",)]
    conn.close()


def test_the_sqlite_copy_is_consistent_while_a_writer_holds_a_transaction(tmp_path):
    from ops_tools.backup.collect import sqlite_copy

    db = tmp_path / "gateway.db"
    live = sqlite3.connect(db, isolation_level=None)
    live.execute("pragma journal_mode=wal")
    live.execute("create table t (v text)")
    live.execute("insert into t values ('committed')")
    live.execute("begin immediate")
    live.execute("insert into t values ('in flight')")
    try:
        copy = tmp_path / "copy.db"
        copy.write_bytes(sqlite_copy(db))
    finally:
        live.execute("rollback")
        live.close()
    with sqlite3.connect(copy) as conn:
        assert conn.execute("select v from t").fetchall() == [("committed",)]
    conn.close()
    with pytest.raises(OpsError, match="does not exist"):
        sqlite_copy(tmp_path / "missing.db")
    assert not (tmp_path / "missing.db").exists()  # never created empty

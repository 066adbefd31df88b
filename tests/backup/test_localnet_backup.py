"""Backup and restore on the real local network (``ops-tools localnet up``, under the
machine-wide lock): a round trip that brings a service's database back, the refusals that
keep a wrong passphrase or an altered archive from writing, and the key-loss drill bringing
authority-0 back with the same peer id and session keys.

The drill's time to recover is printed (``-s``), never asserted: docs/backup.md."""

from __future__ import annotations

import json
import sqlite3
import time
import urllib.request
from pathlib import Path

import pytest

from ops_tools.backup import keyloss, store
from tests.localnet import ROOT, ops

pytestmark = pytest.mark.slow
INVENTORY = ROOT / "inventories" / "local"
PASSPHRASE = "drill passphrase, never on a command line"


@pytest.fixture(scope="module")
def localnet(shared_localnet):
    net = shared_localnet()  # the default network, shared with other modules: leave it healthy
    return net.env, net.up, net.state


@pytest.fixture
def passphrase_file(tmp_path):
    path = tmp_path / "passphrase"
    path.write_text(PASSPHRASE + "\n")
    path.chmod(0o600)
    return path


def probe(db: Path, value: str | None = None) -> str:
    """A row of the test's own in the faucet's live database (WAL: beside the service)."""
    with sqlite3.connect(db, timeout=30) as conn:
        conn.execute("create table if not exists backup_probe (v text)")
        if value is not None:
            conn.execute("delete from backup_probe")
            conn.execute("insert into backup_probe values (?)", (value,))
        row = conn.execute("select v from backup_probe").fetchone()
    conn.close()
    return row[0]


def ready(url: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{url}/ready", timeout=5) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, f"{url} not ready within {timeout_s} s"
        time.sleep(1)


def test_backup_then_restore_brings_the_database_back(localnet, passphrase_file, tmp_path):
    env, up, state = localnet
    faucet_db = state / "faucet-0" / "faucet.db"
    probe(faucet_db, "at backup")
    out = tmp_path / "backup"
    made = ops("backup", "--inventory", str(INVENTORY), "--out", str(out),
               "--passphrase-file", str(passphrase_file), "--json", env=env)
    assert made.returncode == 0, made.stderr
    result = json.loads(made.stdout)
    assert result["network"]["genesis_hash"] == up["genesis_hash"]
    kinds = {(m["kind"], m["host"]) for m in result["members"]}
    assert {("node_key", h) for h in ("authority-0", "authority-1", "rpc-0")} <= kinds
    assert {("keystore", "authority-0"), ("keystore", "authority-1")} <= kinds
    assert {("database", h) for h in ("faucet-0", "gateway-0", "attestation-0")} <= kinds
    assert [m["name"] for m in result["members"] if m["kind"] == "release"] == \
        ["release/chainspec.json", "release/node", "release/release.json"]
    assert PASSPHRASE not in made.stdout + made.stderr
    assert all(f.stat().st_mode & 0o777 == 0o600 for f in out.iterdir())

    probe(faucet_db, "after backup")
    wrong = tmp_path / "wrong"
    wrong.write_text("not the passphrase at all")
    wrong.chmod(0o600)
    refused = ops("restore", "--inventory", str(INVENTORY), "--from", str(out),
                  "--passphrase-file", str(wrong), "--yes", env=env)
    assert refused.returncode != 0 and "wrong passphrase" in refused.stderr
    assert probe(faucet_db) == "after backup"

    unconfirmed = ops("restore", "--inventory", str(INVENTORY), "--from", str(out),
                      "--passphrase-file", str(passphrase_file), env=env)
    assert unconfirmed.returncode == 2 and "pass --yes" in unconfirmed.stderr
    assert probe(faucet_db) == "after backup"

    restored = ops("restore", "--inventory", str(INVENTORY), "--from", str(out),
                   "--passphrase-file", str(passphrase_file), "--kind", "database",
                   "--host", "faucet-0", "--yes", "--json", env=env)
    assert restored.returncode == 0, restored.stderr
    # it said what it replaces before it did
    assert f"replace         {faucet_db}" in restored.stderr
    report = json.loads(restored.stdout)
    assert report["restarted"] == ["faucet-0"]
    assert probe(faucet_db) == "at backup"
    ready(up["public"]["faucet_url"])


def test_an_altered_backup_writes_nothing(localnet, passphrase_file, tmp_path):
    env, _, state = localnet
    out = tmp_path / "backup"
    made = ops("backup", "--inventory", str(INVENTORY), "--out", str(out), "--host",
               "authority-1", "--passphrase-file", str(passphrase_file), env=env)
    assert made.returncode == 0, made.stderr
    key = state / "authority-1" / "data"
    before = {p: p.read_bytes() for p in key.rglob("*") if p.is_file() and "network" in p.parts}
    sealed = bytearray((out / store.ARCHIVE).read_bytes())
    sealed[len(sealed) // 2] ^= 1
    (out / store.ARCHIVE).write_bytes(bytes(sealed))
    refused = ops("restore", "--inventory", str(INVENTORY), "--from", str(out),
                  "--passphrase-file", str(passphrase_file), "--yes", env=env)
    assert refused.returncode != 0
    assert "damaged or was altered" in refused.stderr and "replace" not in refused.stderr
    assert before == {p: p.read_bytes() for p in before}


def test_key_loss_drill_restores_the_same_peer_id(localnet, passphrase_file, tmp_path,
                                                   monkeypatch):
    env, _, _ = localnet
    monkeypatch.setenv("NET_LOCALNET_DIR", env["NET_LOCALNET_DIR"])
    steps: list[str] = []
    report = keyloss.key_loss(INVENTORY, tmp_path / "drill", passphrase_file,
                              on_step=steps.append)
    assert report.peer_id_after == report.peer_id_before
    assert report.session_keys_after == report.session_keys_before
    assert len(report.session_keys_before) >= 2  # aura and grandpa
    assert report.finalized_after > report.finalized_at_stop
    assert any(s.startswith("deleting") for s in steps)
    # a resumed drill after a finished one has nothing to restore
    assert keyloss.heal(INVENTORY, tmp_path / "drill", passphrase_file) is False
    print(f"\nkey-loss drill: recovered in {report.time_to_recover_s:.1f} s"
          f" (restore {report.restore_s:.1f} s), finalized #{report.finalized_at_stop}"
          f" -> #{report.finalized_after}")

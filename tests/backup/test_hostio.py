"""The program that backup and restore run on a remote host (``backup.hostio.REMOTE``), run
here by a shell instead of ssh (the same line, as root): bounded reads, atomic writes that keep
the target's owner (else its directory's), listings, removal, and the consistent SQLite copy.
Over real ssh with sudo it runs in tests/hosts/test_testnet_shape.py."""

from __future__ import annotations

import hashlib
import os
import pwd
import sqlite3

import pytest

from ops_tools.backup.hostio import SshIO
from ops_tools.deploy.ssh import Machine
from ops_tools.errors import OpsError

pytestmark = pytest.mark.process  # each operation is a shell running python3


class ShellIO(SshIO):
    """SshIO whose transport is a local shell: everything but ssh itself."""

    def _transport(self) -> list[str]:
        return ["sh", "-c"]


@pytest.fixture
def io():
    shell = ShellIO(Machine.of("here", {"ansible_host": "127.0.0.1", "ansible_user": "root"}))
    yield shell
    shell.close()


def test_a_read_is_bounded_on_the_host(io, tmp_path):
    big = tmp_path / "big"
    big.write_bytes(b"x" * 4097)
    assert io.read(big, 4097, "a file") == b"x" * 4097
    with pytest.raises(OpsError, match="larger than 4096 bytes"):
        io.read(big, 4096, "a file")
    assert io.read(tmp_path / "missing", 10, "a file") is None
    assert io.sha256(tmp_path / "missing") is None
    assert io.sha256(big) == hashlib.sha256(b"x" * 4097).hexdigest()


def test_binary_content_round_trips_through_write_and_read(io, tmp_path):
    data = bytes(range(256)) * 3
    target = tmp_path / "keystore" / "61757261aa"
    io.write(target, data, 0o600, 0o700)
    assert io.read(target, 1 << 20, "key") == data
    assert target.stat().st_mode & 0o777 == 0o600
    assert target.parent.stat().st_mode & 0o777 == 0o700
    assert io.files(target.parent) == ["61757261aa"]
    assert not [p for p in target.parent.iterdir() if p.name.startswith(".restore-")]
    io.remove(target.parent)
    assert not target.parent.exists() and io.files(target.parent) is None
    assert not io.exists(target)


@pytest.mark.skipif(os.geteuid() != 0, reason="changing owners needs root")
def test_a_write_keeps_the_owner_of_the_file_else_of_its_directory(io, tmp_path):
    nobody = pwd.getpwnam("nobody")
    home = tmp_path / "node"
    home.mkdir()
    os.chown(home, nobody.pw_uid, nobody.pw_gid)
    key = home / "secret_ed25519"
    key.write_bytes(b"old")
    os.chown(key, nobody.pw_uid, nobody.pw_gid)
    io.write(key, b"restored", 0o600)
    assert (key.stat().st_uid, key.read_bytes()) == (nobody.pw_uid, b"restored")
    # A keystore deleted with its directory: both come back as the node's user's.
    new = home / "keystore" / "6772616ebb"
    io.write(new, b"key", 0o600, 0o700)
    assert new.stat().st_uid == nobody.pw_uid and new.parent.stat().st_uid == nobody.pw_uid


def test_the_sqlite_copy_on_the_host_is_consistent_while_a_writer_holds_a_transaction(
        io, tmp_path):
    db = tmp_path / "faucet.db"
    live = sqlite3.connect(db, isolation_level=None)
    live.execute("pragma journal_mode=wal")
    live.execute("create table t (v text)")
    live.execute("insert into t values ('committed')")
    live.execute("begin immediate")
    live.execute("insert into t values ('in flight')")
    try:
        data = io.sqlite_copy(db, 1 << 20)
    finally:
        live.execute("rollback")
        live.close()
    assert data is not None
    copy = tmp_path / "copy.db"
    copy.write_bytes(data)
    with sqlite3.connect(copy) as conn:
        assert conn.execute("select v from t").fetchall() == [("committed",)]
    conn.close()
    with pytest.raises(OpsError, match="larger than 10 bytes"):
        io.sqlite_copy(db, 10)
    assert io.sqlite_copy(tmp_path / "missing.db", 1 << 20) is None
    assert not (tmp_path / "missing.db").exists()  # never created empty


def test_a_failing_operation_names_the_host_and_the_path(io, tmp_path):
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(OpsError, match=r"here \(127\.0\.0\.1\): writing .*file/under failed"):
        io.write(tmp_path / "file" / "under", b"x", 0o600)

"""The signer's lease and the shared salt on each database (SQLite and PostgreSQL), in-process:
who may take a lease, who is refused and with which words, and one salt for every instance."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from sqlalchemy import update

from ops_tools.services.common.db import Database
from ops_tools.services.common.migrations import migrate
from ops_tools.services.faucet import app as faucet_app
from ops_tools.services.faucet.lease import LeaseHeld, SignerLease
from ops_tools.services.faucet.store import VERSION_TABLE, Ledger, signer_leases

MIGRATIONS = Path(faucet_app.__file__).parent / "migrations"
ACCOUNT = "ab" * 32


@pytest.fixture
def db(database_url: str) -> Database:
    database = Database(database_url)
    migrate(database, MIGRATIONS, version_table=VERSION_TABLE)
    return database


def lease(db: Database, duration_s: float = 60) -> SignerLease:
    return SignerLease(db, ACCOUNT, "5Faucet", duration_s)


def test_a_live_lease_refuses_a_second_signer_and_names_its_holder(db: Database) -> None:
    first, second = lease(db), lease(db)
    first.acquire()
    with pytest.raises(LeaseHeld) as info:
        second.acquire()
    message = str(info.value)
    assert "seed_file" in message and "5Faucet" in message
    assert f"pid {os.getpid()}" in message and first.me.host in message
    assert first.held() and not second.held()
    first.release()
    second.acquire()  # given up: free
    assert second.held()


def test_an_expired_lease_is_taken_over(db: Database) -> None:
    first, second = lease(db), lease(db)
    first.acquire()
    with db.session(write=True) as s:  # it stopped renewing
        s.execute(update(signer_leases).values(expires_at=time.time() - 1))
    second.acquire()
    assert second.held()
    # The first one's renewal finds another holder: it does not take the lease back.
    assert first._take() is not None


@pytest.mark.process
def test_the_lease_of_a_dead_process_on_this_host_is_taken_over(db: Database) -> None:
    lease(db).acquire()
    live = subprocess.Popen(["sleep", "60"])
    gone = subprocess.Popen(["true"])
    gone.wait()  # reaped: its PID names no process now
    try:
        with db.session(write=True) as s:  # held by another process on this host, alive
            s.execute(update(signer_leases).values(pid=live.pid))
        with pytest.raises(LeaseHeld):
            lease(db).acquire()
        with db.session(write=True) as s:  # that process crashed without giving it up
            s.execute(update(signer_leases).values(pid=gone.pid))
        taker = lease(db)
        taker.acquire()
        assert taker.held()
    finally:
        live.kill()
        live.wait()


def test_every_instance_on_a_database_gets_the_same_salt(db: Database, tmp_path: Path) -> None:
    legacy = tmp_path / "faucet.salt"
    legacy.write_bytes(b"an instance's salt from before: keep its limits")
    first = Ledger(db).shared_salt(legacy.read_bytes())
    assert first == legacy.read_bytes()  # adopted, not replaced
    assert Ledger(db).shared_salt(None) == first
    assert Ledger(db).shared_salt(b"another instance's old salt") == first


def test_an_expired_drip_is_never_applied_once_its_signer_used_its_nonce(db: Database) -> None:
    """The ledger's side of a ticket that expired (status ``unknown``): only a drip of the same
    signer and genesis in a block with the same nonce settles it, and its key is free again."""
    ledger, genesis, other = Ledger(db), "0x" + "11" * 32, "cd" * 32

    def drip(key: str, nonce: int, status: str, signer: str = ACCOUNT,
             on: str = genesis) -> int:
        drip_id = ledger.open(on, "r-" + key, "c", 1, "k-" + key)
        assert isinstance(drip_id, int)
        ledger.journal(drip_id, signer=signer, reservation="res-" + key,
                       extrinsic_hash="0x" + key * 64, nonce=nonce, from_block=1)
        ledger.update(drip_id, status=status)
        return drip_id

    expired = drip("a", 7, "unknown")
    landed_itself = drip("b", 8, "unknown")  # nothing else used nonce 8: it may have landed
    drip("c", 9, "unknown")
    drip("d", 9, "included", signer=other)  # another signer's nonce 9 is not this one's
    drip("e", 10, "unknown", on="0x" + "22" * 32)
    drip("f", 10, "included")  # the same nonce on another network's ledger rows
    assert ledger.never_applied(genesis, ACCOUNT) == []
    drip("g", 7, "included")
    settled = ledger.never_applied(genesis, ACCOUNT)
    assert [(r.id, r.reservation) for r in settled] == [(expired, "res-a")]
    row = ledger.get(expired)
    assert row is not None and (row.status, row.error_code) == ("dropped", "nonce_used")
    assert ledger.by_idempotency(genesis, "k-a") is None  # the key is free again
    assert ledger.get(landed_itself).status == "unknown"  # type: ignore[union-attr]
    assert ledger.never_applied(genesis, ACCOUNT) == []  # once

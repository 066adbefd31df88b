"""The store on SQLite and PostgreSQL: a reset forgets the old network's workers and heartbeats
and closes its unsettled receipts; settlement claims are never shared; the development key."""

from __future__ import annotations

import itertools
import time

import pytest

from ops_tools.services.gateway import store
from ops_tools.services.gateway.database import open_database

OLD, NEW = "0x" + "01" * 32, "0x" + "02" * 32
ALICE = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"
OP = "5GGoy19EdcPPzwtSBPd5uaS5NCz2QZG93RQ1eKZveLqmL3tz"


_ids = itertools.count()


def _open(rid: str | None = None, genesis: str = NEW) -> store.Opening:
    return store.Opening(rid or f"r-auto-{next(_ids)}", "m", "chat", genesis)


def _receipt(cost: int) -> dict:
    """What a finished request writes on its (opened) receipt."""
    return {"operator": OP, "worker": None, "input_tokens": 1, "output_tokens": 1,
            "cost": cost, "status": "ok", "error": None, "usage_discrepancy": None}


def test_reset_forgets_the_old_network(database_url):
    db = open_database(database_url, pool_size=2)
    try:
        engine = db.engine
        key, _ = store.create_key(engine, ALICE, budget=None, rpm=None, tpm=None)
        for genesis in (OLD, NEW):
            store.save_worker(engine, {"operator": OP, "endpoint": f"http://127.0.0.1:1/{genesis[-2:]}",
                                       "models": ["m"], "capacity": 1, "genesis_hash": genesis},
                              time.time(), max_per_operator=4, ttl_s=60)
            store.save_heartbeat(engine, {"operator": OP, "epoch": 3, "timestamp": 1,
                                          "genesis_hash": genesis}, time.time())
        reservation = store.reserve(engine, key, 10, time.time(), _open("old-1", OLD))
        assert store.settle_request(engine, reservation, _receipt(7))
        reservation = store.reserve(engine, key, 10, time.time(), _open("new-1", NEW))
        assert store.settle_request(engine, reservation, _receipt(5))
        assert store.forget_other_networks(engine, NEW) == {
            "workers": 1, "heartbeats": 1, "receipts_closed": 1}
        workers, heartbeats = store.load_registry(engine, NEW, time.time() - 60)
        assert [w["genesis_hash"] for w in workers] == [NEW] and heartbeats == {OP: 3}
        assert store.get_receipt(engine, "old-1")["settle_status"] == "closed"
        assert store.get_receipt(engine, "old-1")["genesis_hash"] == OLD
        # Only the new network's receipt is claimed, once: a second claim finds nothing.
        claims = store.claim_for_settlement(engine, NEW)
        assert [(op, amount, n) for _, op, amount, n in claims] == [(OP, 5, 1)]
        assert store.claim_for_settlement(engine, NEW) == []
        store.finish_settlement(engine, claims[0][0], extrinsic_hash=None, block_hash=None,
                                block_number=None, error="pool full")
        assert store.get_receipt(engine, "new-1")["settle_status"] == "pending"
        # A heartbeat never goes back to an older epoch.
        assert store.save_heartbeat(engine, {"operator": OP, "epoch": 2, "timestamp": 2,
                                             "genesis_hash": NEW}, time.time()) == 3
    finally:
        db.dispose()


def test_development_key_is_created_once(database_url):
    db = open_database(database_url, pool_size=2)
    try:
        assert store.ensure_key(db.engine, "sk-net-test-dev", ALICE)
        assert not store.ensure_key(db.engine, "sk-net-test-dev", ALICE)
        assert store.key_exists(db.engine, "sk-net-test-dev")
        assert [k["account"] for k in store.list_keys(db.engine)] == [ALICE]
    finally:
        db.dispose()


def test_reservation_limits_and_settlement_are_exact(database_url):
    """The hot path's two transactions (plain SQL on both databases): a reservation holds the
    maximum cost, settlement moves the actual cost to spent; budget, revocation, rpm and tpm
    refuse, and a refusal reserves nothing."""
    db = open_database(database_url, pool_size=2)
    try:
        engine = db.engine
        now = time.time()
        key, key_id = store.create_key(engine, ALICE, budget=100, rpm=None, tpm=None)

        def row(kid: int = key_id) -> dict:
            return next(k for k in store.list_keys(engine) if k["id"] == kid)

        first = store.reserve(engine, key, 60, now, _open("r-1"))
        assert (first.key_id, first.account, first.amount) == (key_id, ALICE, 60)
        assert (row()["reserved"], row()["spent"]) == (60, 0)
        with pytest.raises(store.KeyRejected) as refused:
            store.reserve(engine, key, 41, now, _open())
        assert refused.value.reason == "budget" and row()["reserved"] == 60
        assert store.get_receipt(engine, "r-1")["settle_status"] == "open"
        second = store.reserve(engine, key, 40, now, _open("r-2"))
        store.settle_request(engine, first, _receipt(25))
        assert (row()["reserved"], row()["spent"]) == (40, 25)
        store.settle_request(engine, second, {**_receipt(0), "status": "failed", "error": "gone"})
        assert (row()["reserved"], row()["spent"]) == (0, 25)
        assert store.get_receipt(engine, "r-1")["settle_status"] == "pending"
        assert store.get_receipt(engine, "r-2")["error"] == "gone"
        with pytest.raises(store.KeyRejected) as unknown:
            store.reserve(engine, "sk-net-test-unknown", 1, now, _open())
        assert unknown.value.reason == "invalid"
        store.revoke_key(engine, key_id)
        with pytest.raises(store.KeyRejected) as revoked:
            store.reserve(engine, key, 1, now, _open())
        assert revoked.value.reason == "invalid"

        limited, limited_id = store.create_key(engine, ALICE, budget=None, rpm=2, tpm=None)
        store.reserve(engine, limited, 5, now, _open())
        store.reserve(engine, limited, 5, now, _open())
        with pytest.raises(store.KeyRejected) as rpm:
            store.reserve(engine, limited, 5, now, _open())
        assert (rpm.value.reason, rpm.value.limit) == ("rpm", 2) and rpm.value.retry_after > 0
        assert row(limited_id)["reserved"] == 10  # the refused one was rolled back
        assert store.reserve(engine, limited, 5, now + 60, _open()).window == int((now + 60) // 60)

        metered, metered_id = store.create_key(engine, ALICE, budget=None, rpm=None, tpm=10)
        one = store.reserve(engine, metered, 5, now, _open())
        store.settle_request(engine, one, {**_receipt(1), "input_tokens": 4, "output_tokens": 6})
        with pytest.raises(store.KeyRejected) as tpm:
            store.reserve(engine, metered, 5, now, _open())
        assert (tpm.value.reason, tpm.value.limit) == ("tpm", 10)
        assert row(metered_id)["reserved"] == 0
        store.reserve(engine, metered, 5, now + 60, _open())  # a new minute has no tokens yet
    finally:
        db.dispose()


def test_a_busy_database_refuses_at_once_and_leaks_no_connection(tmp_path):
    """The gateway's inline SQLite connection does not wait for the write lock: while another
    connection holds it, the transaction fails at BEGIN (and is then sent to the writer thread)
    with nothing applied, and its pooled connection is back for the next one."""
    import sqlite3

    from ops_tools.services.gateway.service import _no_wait_engine

    url = f"sqlite:///{tmp_path / 'gw.db'}"
    db = open_database(url, pool_size=1)
    inline = _no_wait_engine(db.engine)  # the gateway's own
    inline.pool._max_overflow = 0  # one connection: a leaked one would block the next checkout

    try:
        key, key_id = store.create_key(db.engine, ALICE, budget=None, rpm=None, tpm=None)
        holder = sqlite3.connect(tmp_path / "gw.db", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        for _ in range(3):
            with pytest.raises(sqlite3.OperationalError) as busy:
                store.reserve(inline, key, 5, time.time(), _open())
            assert busy.value.sqlite_errorcode == sqlite3.SQLITE_BUSY
            # At once, not after SQLite's busy wait (the platform's 30 s).
            with inline.connect() as conn:
                assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 0
        holder.execute("ROLLBACK")
        holder.close()
        assert store.reserve(inline, key, 5, time.time(), _open()).amount == 5
        assert next(k for k in store.list_keys(db.engine) if k["id"] == key_id)["reserved"] == 5
    finally:
        inline.dispose()
        db.dispose()


def test_lost_requests_are_reconciled_once(database_url):
    """A request whose gateway never finished it (a crash, a failed write) leaves an open
    receipt: the reconciler closes it and releases its reservation once; a late settle of the
    same request then changes nothing (no double release, no charge)."""
    db = open_database(database_url, pool_size=2)
    try:
        engine = db.engine
        key, key_id = store.create_key(engine, ALICE, budget=100, rpm=None, tpm=None)
        lost = store.reserve(engine, key, 30, 1000.0, _open("lost-1"))
        young = store.reserve(engine, key, 20, time.time(), _open("young-1"))
        reserved = next(k for k in store.list_keys(engine) if k["id"] == key_id)["reserved"]
        assert reserved == 50
        assert store.reconcile_open(engine, older_than=time.time() - 60) == 1
        assert store.reconcile_open(engine, older_than=time.time() - 60) == 0
        row = next(k for k in store.list_keys(engine) if k["id"] == key_id)
        assert (row["reserved"], row["spent"]) == (20, 0)
        receipt = store.get_receipt(engine, "lost-1")
        assert (receipt["status"], receipt["cost"]) == ("failed", 0)
        assert "reconciled" in receipt["error"]
        assert not store.settle_request(engine, lost, _receipt(30))  # too late: no effect
        assert store.settle_request(engine, young, _receipt(20))
        row = next(k for k in store.list_keys(engine) if k["id"] == key_id)
        assert (row["reserved"], row["spent"]) == (0, 20)
    finally:
        db.dispose()


def test_misreports_are_counted_per_operator(database_url):
    db = open_database(database_url, pool_size=2)
    try:
        engine = db.engine
        key, _ = store.create_key(engine, ALICE, budget=None, rpm=None, tpm=None)
        for i in range(2):
            one = store.reserve(engine, key, 5, time.time(), _open())
            store.settle_request(engine, one, {**_receipt(1),
                                               "usage_discrepancy": f"lie {i}"})
        honest = store.reserve(engine, key, 5, time.time(), _open())
        store.settle_request(engine, honest, _receipt(1))
        [row] = store.misreporting_operators(engine, NEW)
        assert (row["operator"], row["misreports"], row["last_reason"]) == (OP, 2, "lie 1")
        assert store.misreporting_operators(engine, OLD) == []
    finally:
        db.dispose()

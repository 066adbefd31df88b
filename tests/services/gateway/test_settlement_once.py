"""Settlement pays exactly once when a submission's outcome is unknown. A real TCP proxy on
loopback stands between the gateway and a real development node and drops the connection on the
first ``author_submitExtrinsic``: after forwarding it (the node has it, the gateway never hears)
or before (the node never has it). Either way the operator receives exactly one transfer for
its receipts, read from the chain's events; a settlement left claimed, or recorded and sent, by
a run that crashed is recovered by the next gateway, and paid once."""

from __future__ import annotations

import time
import urllib.parse

import httpx
import pytest
from sqlalchemy import select
from substrateinterface import Keypair, SubstrateInterface

from ops_tools.services.gateway import chain_io, schema, store
from tests.services.tcp_proxy import TcpProxy

from .conftest import TOKEN, make_key
from .harness import start_gateway, start_worker, transfer, wait_for

pytestmark = pytest.mark.timeout(600)
SETTLEMENT = Keypair.create_from_uri("//Ferdie", ss58_format=42).ss58_address
FAST = {"settle_interval_s": 1.0, "settle_era_period": 8, "settle_wait_s": 3.0,
        "settle_claim_grace_s": 0.0}


def _target(chain) -> tuple[str, int]:
    url = urllib.parse.urlsplit(chain.http)
    return url.hostname, url.port


def transfers_to(chain, operator: str, since: int) -> list[int]:
    """Amounts of every Balances.Transfer from the settlement account to ``operator`` in the
    blocks after ``since``."""
    substrate = SubstrateInterface(url=chain.http, ss58_format=42)
    try:
        head = substrate.get_block_number(substrate.get_chain_head())
        out = []
        for number in range(since + 1, head + 1):
            for event in substrate.get_events(substrate.get_block_hash(number)):
                e = event.value
                if (e["module_id"], e["event_id"]) == ("Balances", "Transfer") and \
                        e["attributes"]["from"] == SETTLEMENT and \
                        e["attributes"]["to"] == operator:
                    out.append(int(e["attributes"]["amount"]))
        return out
    finally:
        substrate.close()


def best(chain) -> int:
    substrate = SubstrateInterface(url=chain.http, ss58_format=42)
    try:
        return int(substrate.get_block_number(substrate.get_chain_head()))
    finally:
        substrate.close()


def _earn(tmp_path, chain, gw, engine, uri: str, n: int) -> tuple[str, list[dict], str]:
    w = start_worker(tmp_path / "worker", chain, gw.url, name="earner", dev_uri=uri,
                     register_stake=2 * TOKEN)
    transfer(chain, "//Alice", w.operator, 5 * TOKEN)
    key = make_key(engine)
    try:
        wait_for(lambda: gw.workers()["live_workers_per_model"].get("net-test-chat"), 90,
                 "the worker to be live")
        for _ in range(n):
            response = httpx.post(gw.url + "/v1/chat/completions", timeout=30,
                                  headers={"Authorization": f"Bearer {key}"},
                                  json={"model": "net-test-chat", "max_tokens": 5,
                                        "messages": [{"role": "user", "content": "pay me"}]})
            # A refusal says why: the gateway's view of its workers, and both logs.
            assert response.status_code == 200, (
                f"{response.text}\nworkers: {gw.get('/v1/workers').text}\n"
                f"gateway log:\n{gw.proc.tail()}\nworker log:\n{w.proc.tail()}")
    finally:
        w.proc.stop()
    receipts = wait_for(lambda: [r for r in store.usage(engine, key)["receipts"]
                                 if r["settle_status"] != "open"] or None, 30, "receipts")
    return w.operator, receipts, key


def _settled(engine, key: str) -> list[dict] | None:
    receipts = store.usage(engine, key)["receipts"]
    return receipts if receipts and all(r["settle_status"] == "settled"
                                        for r in receipts) else None


@pytest.mark.parametrize("forward", [True, False], ids=["node-has-it", "node-never-saw-it"])
def test_a_lost_submission_is_paid_exactly_once(tmp_path, chain, forward):
    from ops_tools.services.gateway.database import open_database

    proxy = TcpProxy(_target(chain), drop_submit="after" if forward else "before")
    root = tmp_path / "gw"
    gw = start_gateway(root, chain, f"sqlite:///{root / 'gw.sqlite3'}",
                       extra={**FAST, "rpc_url": proxy.url})
    db = open_database(f"sqlite:///{root / 'gw.sqlite3'}", pool_size=2)
    try:
        since = best(chain)
        uri = f"//GwOnce{int(forward)}"
        operator, receipts, key = _earn(tmp_path, chain, gw, db.engine, uri, 3)
        owed = sum(r["cost"] for r in receipts)
        assert owed > 0
        settled = wait_for(lambda: _settled(db.engine, key), 120, "the receipts to settle")
        assert proxy.dropped == 1
        time.sleep(3)  # several more settlement runs: none may pay again
        # Each transfer on chain is one settlement's, and pays its receipts once.
        by_extrinsic: dict[str, int] = {}
        for r in settled:
            by_extrinsic[r["settled_extrinsic"]] = by_extrinsic.get(r["settled_extrinsic"], 0) \
                + r["cost"]
        transfers = transfers_to(chain, operator, since)
        assert sum(transfers) == owed
        assert sorted(transfers) == sorted(by_extrinsic.values())
        with db.engine.connect() as conn:
            rows = [dict(r) for r in conn.execute(
                select(schema.settlements).where(schema.settlements.c.operator == operator)
            ).mappings()]
        assert sorted(r["extrinsic_hash"] for r in rows if r["status"] == "settled") == \
            sorted(by_extrinsic)
        failed = [r for r in rows if r["status"] == "failed"]
        if forward:  # the lost answer's transfer was found in its block, not paid again
            assert failed == []
        else:  # it expired unpaid; its receipts were paid by a later transfer
            assert len(failed) == 1 and "expired without being included" in failed[0]["error"]
            assert failed[0]["extrinsic_hash"] not in by_extrinsic
    finally:
        gw.proc.stop()
        db.dispose()
        proxy.close()


def test_a_crashed_runs_settlements_are_recovered_and_paid_once(tmp_path, chain):
    """A run that claimed receipts and died before sending (``submitting``), and one that
    recorded and sent its transfer and died before it saw the block (``submitted``): the next
    gateway returns the first to pending and pays it, and finds the second on chain."""
    from ops_tools.services.gateway.database import open_database

    root = tmp_path / "gw"
    url = f"sqlite:///{root / 'gw.sqlite3'}"
    gw = start_gateway(root, chain, url, settle=False)
    db = open_database(url, pool_size=2)
    try:
        since = best(chain)
        genesis = gw.workers()["genesis_hash"]
        op_a, receipts_a, key_a = _earn(tmp_path / "a", chain, gw, db.engine, "//GwCrashA", 2)
        op_b, receipts_b, key_b = _earn(tmp_path / "b", chain, gw, db.engine, "//GwCrashB", 2)
        gw.proc.stop()
        claims = {op: (sid, amount) for sid, op, amount, _ in
                  store.claim_for_settlement(db.engine, genesis)}
        assert set(claims) == {op_a, op_b}
        # B's run got as far as sending its transfer. Its era: the gateway's default of 64 blocks
        # (32 s here); a loaded rehearsal once took longer than 8 blocks from sign to send.
        settler = chain_io.Settler(chain.http, Keypair.create_from_uri("//Ferdie", ss58_format=42),
                                   5.0, 64)
        signed = settler.sign(op_b, claims[op_b][1])
        store.record_submission(db.engine, claims[op_b][0], extrinsic_hash=signed.extrinsic_hash,
                                nonce=signed.nonce, era_birth=signed.era_birth,
                                era_period=signed.era_period)
        settler.send(signed)

        gw = start_gateway(root, chain, url, extra=FAST)
        wait_for(lambda: _settled(db.engine, key_a) and _settled(db.engine, key_b), 120,
                 "both operators' receipts to settle")
        time.sleep(3)
        assert transfers_to(chain, op_a, since) == [sum(r["cost"] for r in receipts_a)]
        assert transfers_to(chain, op_b, since) == [sum(r["cost"] for r in receipts_b)]
        assert {r["settled_extrinsic"] for r in _settled(db.engine, key_b)} == {
            signed.extrinsic_hash}
    finally:
        gw.proc.stop()
        db.dispose()

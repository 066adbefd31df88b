"""The faucet finishes what it started, whatever the client and the network do: a stream whose
client hung up, submissions whose answers are lost (a real TCP proxy between the faucet and a
real development node drops the connection right after ``author_submitExtrinsic``), a submission
that never reached the node, a drip nobody can settle (its ticket expires), a request row left
behind by a dead request (pruned), a node that hangs (SIGSTOP) and comes back."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, select, text
from substrateinterface import Keypair

from ops_tools.chain.rpc import RpcClient
from ops_tools.chainspec.hashing import blake2_256
from ops_tools.services.common.hashing import salted_hash
from ops_tools.services.faucet.store import drips
from tests.services.faucet.conftest import (
    DRIP,
    FAUCET_KEY,
    faucet_config,
    fresh,
    run_faucet,
)
from tests.services.faucet.proxy import lossy_proxy
from tests.support.devnode import DevNode, free_balance, fund

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)


def rows(db_url: str) -> list[dict[str, Any]]:
    """The faucet's drips, as the database holds them."""
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(select(drips).order_by(drips.c.id))]
    finally:
        engine.dispose()


def next_nonce(node: DevNode) -> int:
    return int(RpcClient(node.http).call("system_accountNextIndex",
                                             [FAUCET_KEY.ss58_address]))


def in_block(node: DevNode, block_hash: str, xt_hash: str) -> bool:
    block = RpcClient(node.http).call("chain_getBlock", [block_hash])
    return xt_hash in ["0x" + blake2_256(bytes.fromhex(x[2:])).hex()
                       for x in block["block"]["extrinsics"]]


def wait_until(what: str, probe: Any, timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"{what}: not within {timeout:g} s")


def test_a_stream_whose_client_hung_up_is_finished_and_its_retry_gets_the_same_drip(
    funded_faucet: DevNode, tmp_path: Path
) -> None:
    db_url = f"sqlite:///{tmp_path / 'faucet.db'}"
    cfg = faucet_config(tmp_path, funded_faucet, database_url=db_url)
    dest = fresh("hangup")
    body = json.dumps({"recipient": dest}).encode()
    with run_faucet(cfg) as faucet:
        port = int(faucet.url.rsplit(":", 1)[1])
        # The attack: an NDJSON drip with a key, and the socket closed right after sending.
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(
                b"POST /drip-public HTTP/1.1\r\nHost: faucet\r\n"
                b"Content-Type: application/json\r\nAccept: application/x-ndjson\r\n"
                b"Idempotency-Key: hangup-1\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        # Retried as soon as the first request holds the key (it has its row): the retry waits
        # for the first drip, never sends a second one, never answers 409.
        wait_until("the hung-up request's row", lambda: rows(db_url))
        retry = faucet.post({"recipient": dest}, headers={"Idempotency-Key": "hangup-1"})
        again = faucet.post({"recipient": dest}, headers={"Idempotency-Key": "hangup-1"})
        with httpx.stream("POST", faucet.url + "/drip-public", json={"recipient": dest},
                          headers={"Accept": "application/x-ndjson",
                                   "Idempotency-Key": "hangup-1"}, timeout=120) as resp:
            streamed = [json.loads(line) for line in resp.iter_lines() if line]
    assert retry.status_code == 200, retry.text
    assert again.json() == retry.json()
    assert streamed == [retry.json()]
    result = retry.json()
    assert free_balance(funded_faucet.reader(), dest) == DRIP
    assert in_block(funded_faucet, result["block_hash"], result["extrinsic_hash"])
    # One drip, no second attempt, recorded although nobody was waiting for it.
    assert [(r["status"], r["extrinsic_hash"]) for r in rows(db_url)] == [
        ("included", result["extrinsic_hash"])]


def test_a_hung_up_drip_in_flight_at_shutdown_is_recorded_before_the_faucet_exits(
    funded_faucet: DevNode, tmp_path: Path
) -> None:
    db_url = f"sqlite:///{tmp_path / 'faucet.db'}"
    cfg = faucet_config(tmp_path, funded_faucet, database_url=db_url)
    dest = fresh("hangup-shutdown")
    with run_faucet(cfg) as faucet:
        with socket.create_connection(("127.0.0.1", int(faucet.url.rsplit(":", 1)[1]))) as sock:
            body = json.dumps({"recipient": dest}).encode()
            sock.sendall(b"POST /drip-public HTTP/1.1\r\nHost: faucet\r\n"
                         b"Content-Type: application/json\r\nAccept: application/x-ndjson\r\n"
                         + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        wait_until("the drip is sent", lambda: [r for r in rows(db_url)
                                                if r["status"] != "pending"])
        faucet.proc.send_signal(signal.SIGTERM)  # nobody waits for the drip any more
        faucet.proc.wait(timeout=60)  # uvicorn re-raises SIGTERM once it has shut down
    assert [r["status"] for r in rows(db_url)] == ["included"]
    assert free_balance(funded_faucet.reader(), dest) == DRIP


def test_a_drip_sent_by_a_crashed_faucet_is_settled_by_its_restart(
    funded_faucet: DevNode, tmp_path: Path
) -> None:
    db_url = f"sqlite:///{tmp_path / 'faucet.db'}"
    dest, other = fresh("crashed"), fresh("after-crash")
    with lossy_proxy(funded_faucet.ws, mode="before") as proxy:
        # Its submission never reaches the node, then the faucet dies: journaled, unsettled.
        cfg = faucet_config(tmp_path / "a", funded_faucet, database_url=db_url,
                            rpc_url=proxy.url)
        with run_faucet(cfg) as faucet, concurrent.futures.ThreadPoolExecutor(1) as pool:
            pending = pool.submit(faucet.post, {"recipient": dest},
                                  headers={"Idempotency-Key": "crash-1"})
            wait_until("the drip is sent", lambda: [r for r in rows(db_url)
                                                    if r["status"] != "pending"])
            os.killpg(faucet.proc.pid, signal.SIGKILL)  # no drain, no lease given up
            faucet.proc.wait(timeout=30)
            with contextlib.suppress(httpx.HTTPError):
                pending.result(timeout=60)
    (journaled,) = rows(db_url)
    assert journaled["status"] == "submitted"
    # The restart (same seed, same database, a healthy network) follows it again; the next
    # drip takes its unused nonce, so it can never apply: dropped, and its key is free.
    cfg = faucet_config(tmp_path / "b", funded_faucet, database_url=db_url)
    with run_faucet(cfg) as faucet:
        next_one = faucet.post({"recipient": other})
        wait_until("the restart settles it", lambda: rows(db_url)[0]["status"] != "submitted")
        retry = faucet.post({"recipient": dest}, headers={"Idempotency-Key": "crash-1"})
        log = faucet.log_text()
    assert next_one.status_code == 200, next_one.text
    assert rows(db_url)[0]["status"] == "dropped"
    assert retry.status_code == 200, retry.text
    assert retry.json()["extrinsic_hash"] != journaled["extrinsic_hash"]
    assert "sent by an earlier run" in log
    reader = funded_faucet.reader()
    assert [free_balance(reader, d) for d in (dest, other)] == [DRIP, DRIP]


def test_lost_submission_answers_are_reconciled_against_the_chain_not_resent(
    funded_faucet: DevNode, tmp_path: Path
) -> None:
    db_url = f"sqlite:///{tmp_path / 'faucet.db'}"
    dests = [fresh(f"lost-{i}") for i in range(6)]
    with lossy_proxy(funded_faucet.ws, mode="after") as proxy:
        cfg = faucet_config(tmp_path, funded_faucet, database_url=db_url, rpc_url=proxy.url)
        before = next_nonce(funded_faucet)
        with run_faucet(cfg) as faucet, concurrent.futures.ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(
                lambda d: faucet.post({"recipient": d}, headers={"Idempotency-Key": "k-" + d}),
                dests))
            retries = [faucet.post({"recipient": d}, headers={"Idempotency-Key": "k-" + d})
                       for d in dests]
            # No key: a new request for a funded recipient, judged by the limits.
            unkeyed = faucet.post({"recipient": dests[0]})
        log = faucet.log_text()
    assert proxy.lost >= len(dests)  # every submission's answer was lost
    assert [a.status_code for a in answers] == [200] * 6, [a.text for a in answers]
    assert [r.json() for r in retries] == [a.json() for a in answers]
    assert unkeyed.status_code == 429 and unkeyed.json()["error"]["code"] == "recipient_limit"
    reader = funded_faucet.reader()
    assert [free_balance(reader, d) for d in dests] == [DRIP] * 6
    assert next_nonce(funded_faucet) == before + 6  # six transfers, none sent twice
    for answer in answers:
        assert in_block(funded_faucet, answer.json()["block_hash"],
                        answer.json()["extrinsic_hash"])
    assert "the submission's answer was lost" in log
    assert {r["status"] for r in rows(db_url)} == {"included"}


def test_a_submission_that_never_reached_the_node_is_sent_again_with_the_same_bytes(
    funded_faucet: DevNode, tmp_path: Path
) -> None:
    db_url = f"sqlite:///{tmp_path / 'faucet.db'}"
    dest = fresh("never-reached")
    with lossy_proxy(funded_faucet.ws, mode="before", limit=1) as proxy:
        cfg = faucet_config(tmp_path, funded_faucet, database_url=db_url, rpc_url=proxy.url)
        before = next_nonce(funded_faucet)
        with run_faucet(cfg) as faucet:
            answer = faucet.post({"recipient": dest})
            log = faucet.log_text()
    assert proxy.lost == 1
    assert answer.status_code == 200, answer.text
    journaled = rows(db_url)
    assert len(journaled) == 1 and journaled[0]["status"] == "included"
    # The hash journaled before the first attempt is the one in the block: the same bytes.
    assert journaled[0]["extrinsic_hash"] == answer.json()["extrinsic_hash"]
    assert journaled[0]["nonce"] == before
    assert next_nonce(funded_faucet) == before + 1
    assert free_balance(funded_faucet.reader(), dest) == DRIP
    assert "sent the same signed bytes" in log


def test_an_expired_drip_counts_until_its_nonce_is_used_then_its_key_is_free(
    funded_faucet: DevNode, tmp_path: Path
) -> None:
    db_url = f"sqlite:///{tmp_path / 'faucet.db'}"
    dest, later = fresh("expires"), fresh("after-expiry")
    with lossy_proxy(funded_faucet.ws, mode="before") as proxy:
        cfg = faucet_config(tmp_path, funded_faucet, database_url=db_url, rpc_url=proxy.url,
                            inclusion_timeout_s=2, finality_timeout_s=2, ticket_ttl_s=20)
        with run_faucet(cfg) as faucet:
            first = faucet.post({"recipient": dest}, headers={"Idempotency-Key": "exp-1"})
            wait_until("the ticket expires", lambda: rows(db_url)[0]["status"] == "unknown")
            retry = faucet.post({"recipient": dest}, headers={"Idempotency-Key": "exp-1"})
            unkeyed = faucet.post({"recipient": dest})
            proxy.mode = "pass"  # the network heals: the next drip is not stuck behind a gap
            # Its wait (2 s here) may end before its block (504, then 409 while a retry's wait
            # ends first too): the same key gets the result once it is in.
            healed = wait_until("the drip after the expiry", lambda: (r := faucet.post(
                {"recipient": later}, headers={"Idempotency-Key": "healed-1"}))
                .status_code not in (409, 504) and r)
            # That drip took the expired one's nonce: the expired one can never apply, so it is
            # settled as never applied, and its key and its recipient's limit are free again.
            expired = first.json()["error"]["extrinsic_hash"]
            wait_until("the expired drip is settled as never applied", lambda: [
                r for r in rows(db_url) if r["extrinsic_hash"] == expired
                and r["status"] == "dropped"], timeout=60)
            # A new drip under the same key (its 2 s wait may end before its block, as above).
            again = wait_until("the key's new drip", lambda: (r := faucet.post(
                {"recipient": dest}, headers={"Idempotency-Key": "exp-1"}))
                .status_code not in (409, 504) and r)
            log = faucet.log_text()
    assert first.status_code == 504 and first.json()["error"]["code"] == "inclusion_timeout"
    assert retry.status_code == 409 and retry.json()["error"]["code"] == "outcome_unknown"
    assert retry.json()["error"]["extrinsic_hash"] == expired
    # It may still land somewhere: it keeps counting, so no second drip for the recipient.
    assert unkeyed.status_code == 429 and unkeyed.json()["error"]["code"] == "recipient_limit"
    assert "no longer followed" in log
    assert healed.status_code == 200, healed.text
    assert "was never applied: a later drip used its nonce" in log
    assert again.status_code == 200, again.text
    assert again.json()["extrinsic_hash"] != expired
    assert free_balance(funded_faucet.reader(), later) == DRIP
    assert free_balance(funded_faucet.reader(), dest) == DRIP  # once: the expired one never applied


def test_a_row_left_by_a_dead_request_is_pruned_and_frees_its_key(
    funded_faucet: DevNode, tmp_path: Path
) -> None:
    db_url = f"sqlite:///{tmp_path / 'faucet.db'}"
    dest = fresh("pruned")
    cfg = faucet_config(tmp_path, funded_faucet, database_url=db_url, rpc_timeout_s=2)
    with run_faucet(cfg) as faucet:
        engine = create_engine(db_url)
        with engine.begin() as conn:
            salt = bytes.fromhex(conn.execute(text(
                "SELECT value FROM faucet_shared WHERE name = 'salt'")).scalar_one())
            genesis = RpcClient(funded_faucet.http).genesis_hash()
            recipient_hash = salted_hash(
                salt, "recipient:" + Keypair(ss58_address=dest).public_key.hex())
            # What a request that died between its row and its signature leaves behind.
            conn.execute(text(
                "INSERT INTO faucet_drips (genesis, recipient_hash, client_hash,"
                " idempotency_hash, amount, status, created_at, updated_at) VALUES"
                " (:g, :r, 'x', :k, 1, 'pending', :t, :t)"),
                {"g": genesis, "r": recipient_hash, "t": time.time() - 60,
                 "k": salted_hash(salt, "idempotency:dead-1")})
        engine.dispose()
        wait_until("the dead row is pruned",
                   lambda: not [r for r in rows(db_url) if r["status"] == "pending"], timeout=60)
        answer = faucet.post({"recipient": dest}, headers={"Idempotency-Key": "dead-1"})
    assert answer.status_code == 200, answer.text
    assert free_balance(funded_faucet.reader(), dest) == DRIP



def test_a_hung_node_turns_ready_red_then_green_and_loses_nothing(tmp_path: Path) -> None:
    chain = DevNode(tmp_path / "chain" / "base", "dev")
    chain.start()
    try:
        chain.wait_for(lambda: chain.best() >= 1, timeout=90, what="the first block")
        fund(chain, {FAUCET_KEY.ss58_address: 10**16})
        db_url = f"sqlite:///{tmp_path / 'faucet.db'}"
        cfg = faucet_config(tmp_path, chain, database_url=db_url, rpc_timeout_s=2)
        in_flight, hung, after = fresh("hang-in-flight"), fresh("hang-during"), fresh("hang-after")
        with run_faucet(cfg) as faucet, concurrent.futures.ThreadPoolExecutor(1) as pool:
            assert httpx.get(faucet.url + "/ready", timeout=30).status_code == 200
            pending = pool.submit(faucet.post, {"recipient": in_flight},
                                  headers={"Idempotency-Key": "hang-1"})
            wait_until("the drip is sent", lambda: [r for r in rows(db_url)
                                                    if r["status"] != "pending"])
            assert chain.proc is not None
            os.kill(chain.proc.pid, signal.SIGSTOP)  # hangs: it accepts connections, answers none
            try:
                red = wait_until("/ready turns red", lambda: (
                    r := httpx.get(faucet.url + "/ready", timeout=30)).status_code == 503 and r)
                refused = faucet.post({"recipient": hung}, timeout=60)
                time.sleep(5)  # hung for a while, not just a blip
            finally:
                os.kill(chain.proc.pid, signal.SIGCONT)
            wait_until("/ready turns green", lambda: httpx.get(
                faucet.url + "/ready", timeout=30).status_code == 200)
            answer = pending.result(timeout=120)
            replay = faucet.post({"recipient": in_flight}, headers={"Idempotency-Key": "hang-1"})
            later = faucet.post({"recipient": after})
        reader = chain.reader()
        balances = [free_balance(reader, a) for a in (in_flight, hung, after)]
    finally:
        with contextlib.suppress(ProcessLookupError, AttributeError):
            os.kill(chain.proc.pid, signal.SIGCONT)  # type: ignore[union-attr]
        chain.stop()
    checks = {c["name"]: c for c in red.json()["error"]["checks"]}
    assert not checks["chain"]["ok"] and "does not answer" in checks["chain"]["detail"]
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "chain_unavailable"
    assert "Retry-After" in refused.headers
    assert answer.status_code == 200, answer.text
    assert replay.json() == answer.json()
    assert later.status_code == 200, later.text
    assert balances == [DRIP, 0, DRIP]
    assert sorted(r["status"] for r in rows(db_url)) == ["included", "included"]

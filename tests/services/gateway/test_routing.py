"""Routing: only registered operators with a fresh signed heartbeat and a healthy worker get
traffic; one that comes back gets it again; a failure before the first byte is retried on
another worker; a worker killed mid-stream ends the stream with an error event."""

from __future__ import annotations

import signal
import time

import httpx
import pytest
from substrateinterface import Keypair

from ops_tools.chain.wire.heartbeat import sign_heartbeat

from .conftest import TOKEN, make_key
from .harness import (
    LoopbackServer,
    Seen,
    current_epoch,
    free_port,
    live_models,
    register,
    start_worker,
    transfer,
    wait_for,
)

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def key(engine) -> str:
    return make_key(engine)


def chat(gateway, key: str, model: str, **extra) -> httpx.Response:
    return httpx.post(gateway.url + "/v1/chat/completions",
                      headers={"Authorization": f"Bearer {key}"}, timeout=30,
                      json={"model": model, "messages": [{"role": "user", "content": "hi"}],
                            "max_tokens": 3, **extra})


def operator_row(gateway, operator: str) -> dict | None:
    return next((w for w in gateway.workers()["workers"] if w["operator"] == operator), None)


def test_unregistered_operator_is_refused_until_registered(tmp_path, chain, gateway, key):
    w = start_worker(tmp_path, chain, gateway.url, name="unreg", dev_uri="//GwUnregistered",
                     extra={"models": ["unreg-model"]})
    try:
        # The gateway refuses its announcements (403): nothing stored, nothing routed.
        health = wait_for(lambda: (h := httpx.get(w.url + "/health").json())["errors"] and h,
                          30, "the worker's announcement to be refused")
        assert "403" in health["errors"][0] and "not registered" in health["errors"][0]
        assert operator_row(gateway, w.operator) is None
        # Never admitted, it holds no token: its inference routes refuse every caller.
        guessed = httpx.post(w.url + "/v1/chat/completions", timeout=10,
                             headers={"Authorization": "Bearer nwt-guessed"},
                             json={"model": "unreg-model", "messages": []})
        assert guessed.status_code == 401
        refused = chat(gateway, key, "unreg-model")
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "model_not_found"
        transfer(chain, "//Alice", w.operator, 5 * TOKEN)
        register(chain, "//GwUnregistered", 2 * TOKEN)
        # Its next announcement is admitted.
        wait_for(lambda: live_models(gateway).get("unreg-model"), 60, "the worker to be live")
        served = chat(gateway, key, "unreg-model")
        assert served.status_code == 200
        assert served.headers["x-net-operator"] == w.operator
    finally:
        w.proc.stop()


def test_stale_heartbeat_drops_the_worker_and_a_fresh_one_restores_it(
        tmp_path, chain, gateway, key):
    uri = "//GwStale"
    keypair = Keypair.create_from_uri(uri, ss58_format=42)
    transfer(chain, "//Alice", keypair.ss58_address, 5 * TOKEN)
    register(chain, uri, 2 * TOKEN)

    # The worker reaches the gateway through a relay that passes its announcements and loses
    # its heartbeats: the test plays the heartbeats, so it decides when they stop.
    def relay(seen: Seen) -> tuple[int, object]:
        if seen.path == "/v1/workers/announce":
            answer = httpx.post(gateway.url + seen.path, content=seen.body, timeout=30,
                                headers={"content-type": "application/json"})
            return answer.status_code, answer.json()
        return 200, {"accepted": True}

    relay_server = LoopbackServer(relay)
    w = start_worker(tmp_path, chain, relay_server.url, name="stale", dev_uri=uri,
                     extra={"models": ["stale-model"]})
    genesis = gateway.workers()["genesis_hash"]
    try:
        wait_for(lambda: operator_row(gateway, w.operator), 30, "the announcement")

        def beat(epoch: int) -> httpx.Response:
            payload = sign_heartbeat(keypair, epoch=epoch, timestamp=int(time.time()),
                                     genesis_hash=genesis)
            return httpx.post(gateway.url + "/v1/workers/heartbeat", json=payload)

        def beating_and_live() -> bool:
            # A heartbeat keeps an operator live for one to two 3 s epochs: on a busy machine a
            # single one can lapse before the test looks, so beat the current epoch until live.
            beaten = beat(current_epoch(chain))
            if beaten.status_code == 200 and live_models(gateway).get("stale-model"):
                return True
            # Not yet: what the gateway says, for the timeout's message.
            raise AssertionError(f"heartbeat {beaten.status_code} {beaten.text[:200]}; row"
                                 f" {operator_row(gateway, w.operator)}; relayed"
                                 f" {[s.path for s in relay_server.seen[-4:]]}")

        epoch = wait_for(lambda: gateway.workers()["current_epoch"], 10, "the gateway's epoch")
        assert beat(epoch + 5).status_code == 409  # a future epoch would outlive the worker
        forged = sign_heartbeat(Keypair.create_from_uri("//Mallory"), epoch=epoch,
                                timestamp=int(time.time()), genesis_hash=genesis)
        forged["operator"] = keypair.ss58_address
        bad = httpx.post(gateway.url + "/v1/workers/heartbeat", json=forged)
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_heartbeat"
        assert beat(epoch).status_code == 200
        wait_for(beating_and_live, 30, "the worker to be live")
        assert chat(gateway, key, "stale-model").headers["x-net-operator"] == w.operator
        # No heartbeat for two epochs: out.
        wait_for(lambda: "stale-model" not in live_models(gateway), 30, "the worker to drop out")
        assert "heartbeat stale" in operator_row(gateway, w.operator)["reason"]
        assert chat(gateway, key, "stale-model").status_code == 503
        wait_for(beating_and_live, 30, "the worker to be back")
        assert chat(gateway, key, "stale-model").status_code == 200
    finally:
        w.proc.stop()
        relay_server.stop()


def test_failure_before_first_byte_is_retried_on_another_worker(tmp_path, chain, gateway, key):
    dead_engine = f"http://127.0.0.1:{free_port()}"
    bad = start_worker(tmp_path, chain, gateway.url, name="bad", dev_uri="//GwBad",
                       engine_url=dead_engine, register_stake=2 * TOKEN,
                       extra={"models": ["retry-model"]})
    transfer(chain, "//Alice", bad.operator, 5 * TOKEN)
    good = start_worker(tmp_path, chain, gateway.url, name="good", dev_uri="//GwGood",
                        register_stake=2 * TOKEN, extra={"models": ["retry-model"]})
    transfer(chain, "//Alice", good.operator, 5 * TOKEN)
    try:
        wait_for(lambda: live_models(gateway).get("retry-model") == 2, 90, "both workers live")
        # Equally loaded, they are picked at random: go on until the bad one has failed
        # failures_before_cooldown times; every request is still answered, by the good one.
        for attempt in range(40):
            response = chat(gateway, key, "retry-model", stream=attempt % 2 == 1)
            assert response.status_code == 200
            assert response.headers["x-net-operator"] == good.operator
            row = operator_row(gateway, bad.operator)
            if not row["live"] and "cooling down" in row["reason"]:
                break
        else:
            raise AssertionError(f"the bad worker never cooled down: {row}")
    finally:
        bad.proc.stop()
        good.proc.stop()


def test_worker_killed_mid_stream_ends_with_error_event(tmp_path, chain, gateway, key):
    w = start_worker(tmp_path, chain, gateway.url, name="slow", dev_uri="//GwSlow",
                     register_stake=2 * TOKEN,
                     extra={"models": ["slow-model"], "test_engine_token_delay_ms": 200})
    transfer(chain, "//Alice", w.operator, 5 * TOKEN)
    try:
        wait_for(lambda: live_models(gateway).get("slow-model"), 90, "the slow worker")
        events = []
        with httpx.stream("POST", gateway.url + "/v1/chat/completions",
                          headers={"Authorization": f"Bearer {key}"}, timeout=30,
                          json={"model": "slow-model", "stream": True, "max_tokens": 50,
                                "messages": [{"role": "user", "content": "hi"}]}) as response:
            assert response.status_code == 200
            request_id = response.headers["x-request-id"]
            for line in response.iter_lines():
                if not line:
                    continue
                events.append(line)
                if len(events) == 3:
                    w.proc.kill(signal.SIGKILL)
        assert events[-1].startswith("data: {\"error\"")
        assert "data: [DONE]" not in events
        assert len(events) < 50

        def receipt() -> dict | None:
            usage = httpx.get(gateway.url + "/v1/usage",
                              headers={"Authorization": f"Bearer {key}"}).json()
            return next((r for r in usage["receipts"] if r["id"] == request_id), None)

        row = wait_for(receipt, 10, "the receipt")
        assert row["status"] == "failed" and "mid-stream" in row["error"]
        assert row["cost"] == 0 and row["operator"] == w.operator
    finally:
        w.proc.stop()


def test_real_engine_path_through_a_separate_engine_process(tmp_path, chain, gateway, key):
    """The worker in front of another OpenAI-compatible process (the test engine run as its own
    server), never the gateway's code."""
    from .harness import BIN, Proc

    port = free_port()
    engine = Proc([str(BIN / "net-test-engine"), "--port", str(port), "--model", "ext-model"],
                  tmp_path / "engine.log").start()
    try:
        wait_for(lambda: httpx.get(f"http://127.0.0.1:{port}/v1/models").status_code == 200,
                 30, "the engine")
        w = start_worker(tmp_path, chain, gateway.url, name="ext", dev_uri="//GwExternal",
                         register_stake=2 * TOKEN, engine_url=f"http://127.0.0.1:{port}")
        transfer(chain, "//Alice", w.operator, 5 * TOKEN)
        try:
            wait_for(lambda: live_models(gateway).get("ext-model"), 90, "the worker")
            plain = chat(gateway, key, "ext-model")
            assert plain.status_code == 200 and plain.json()["usage"]["completion_tokens"] == 3
            assert plain.headers["x-net-operator"] == w.operator
            streamed = chat(gateway, key, "ext-model", stream=True,
                            stream_options={"include_usage": True})
            lines = [x for x in streamed.text.split("\n") if x]
            assert lines[-1] == "data: [DONE]" and '"choices":[]' in lines[-2]
        finally:
            w.proc.stop()
    finally:
        engine.stop()

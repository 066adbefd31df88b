"""A client that goes away before its answer holds nothing: the worker's slot, the budget
reservation and the upstream request are released at once, and the receipt says what happened
(status failed, cost 0). Real clients on raw sockets that hang up; real workers."""

from __future__ import annotations

import json
import socket
import urllib.parse

import pytest

from ops_tools.services.gateway import store

from .conftest import TOKEN, make_key
from .harness import start_worker, transfer, wait_for

pytestmark = pytest.mark.timeout(300)

BUDGET = 10**15


def send_request(gateway, key: str, body: dict) -> socket.socket:
    """An HTTP/1.1 request on a raw socket, left open (the client decides when to hang up)."""
    url = urllib.parse.urlsplit(gateway.url)
    sock = socket.create_connection((url.hostname, url.port), timeout=10)
    payload = json.dumps(body).encode()
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\n"
        + f"Authorization: Bearer {key}\r\n".encode()
        + b"Content-Type: application/json\r\n"
        + f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload
    )
    return sock


def hang_up(sock: socket.socket) -> None:
    sock.shutdown(socket.SHUT_RDWR)
    sock.close()


def inflight(gateway, operator: str) -> int | None:
    row = next((w for w in gateway.workers()["workers"] if w["operator"] == operator), None)
    return None if row is None else row["inflight"]


def key_row(engine, key: str) -> dict:
    usage = store.usage(engine, key)
    assert usage is not None
    return usage


def released(engine, key: str, gateway, operator: str) -> dict | None:
    usage = key_row(engine, key)
    if usage["reserved"] != 0 or not usage["receipts"] or inflight(gateway, operator) != 0:
        return None
    return usage


@pytest.fixture(scope="module")
def stalled_engine():
    """An engine that accepts connections and never answers (a queue that does not move): the
    kernel completes the handshake from the listen backlog, nobody reads."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


@pytest.mark.parametrize("stream", [False, True])
def test_client_gone_before_the_worker_answers(tmp_path, chain, gateway, engine, stalled_engine,
                                                stream):
    uri = f"//GwStalled{int(stream)}"
    w = start_worker(tmp_path, chain, gateway.url, name="stalled", dev_uri=uri,
                     register_stake=2 * TOKEN, engine_url=stalled_engine,
                     extra={"models": [f"stalled-model-{int(stream)}"]})
    transfer(chain, "//Alice", w.operator, 5 * TOKEN)
    key = make_key(engine, budget=BUDGET)
    try:
        wait_for(lambda: inflight(gateway, w.operator) == 0
                 and gateway.workers()["live_workers_per_model"].get(
                     f"stalled-model-{int(stream)}"), 90, "the stalled worker to be live")
        sock = send_request(gateway, key, {
            "model": f"stalled-model-{int(stream)}", "stream": stream, "max_tokens": 10,
            "messages": [{"role": "user", "content": "hello"}]})
        wait_for(lambda: inflight(gateway, w.operator) == 1, 20, "the request at the worker")
        assert key_row(engine, key)["reserved"] > 0
        hang_up(sock)
        # The gateway's upstream timeout is 300 s: only noticing the hang-up releases it here.
        usage = wait_for(lambda: released(engine, key, gateway, w.operator), 20,
                         "the reservation and the worker's slot to be released")
        assert usage["spent"] == 0
        [receipt] = usage["receipts"]
        assert receipt["status"] == "failed" and receipt["cost"] == 0
        assert receipt["error"] == "client disconnected before the answer"
        assert receipt["operator"] == w.operator
    finally:
        w.proc.stop()


def test_client_gone_after_the_headers_before_the_first_chunk(tmp_path, chain, gateway, engine):
    w = start_worker(tmp_path, chain, gateway.url, name="slowfirst", dev_uri="//GwSlowFirst",
                     register_stake=2 * TOKEN,
                     extra={"models": ["slowfirst-model"], "test_engine_token_delay_ms": 3000})
    transfer(chain, "//Alice", w.operator, 5 * TOKEN)
    key = make_key(engine, budget=BUDGET)
    try:
        wait_for(lambda: gateway.workers()["live_workers_per_model"].get("slowfirst-model"), 90,
                 "the slow worker to be live")
        sock = send_request(gateway, key, {
            "model": "slowfirst-model", "stream": True, "max_tokens": 50,
            "messages": [{"role": "user", "content": "hello"}]})
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(4096)
        status_line, _, rest = head.partition(b"\r\n")
        assert b" 200 " in status_line and b"text/event-stream" in rest
        assert b"data:" not in head.partition(b"\r\n\r\n")[2]  # no chunk yet
        assert inflight(gateway, w.operator) == 1
        hang_up(sock)
        # 50 tokens 3 s apart: the whole answer would take 150 s.
        usage = wait_for(lambda: released(engine, key, gateway, w.operator), 20,
                         "the reservation and the worker's slot to be released")
        assert usage["spent"] == 0
        [receipt] = usage["receipts"]
        assert receipt["status"] == "failed" and receipt["cost"] == 0
        assert receipt["error"] == "client disconnected after 0 chunks"
    finally:
        w.proc.stop()

"""Attacks on the gateway's billing from a hostile worker and a hostile client, performed against
real processes: a development node, ``net-gateway``, real ``net-worker``s in front of a HOSTILE
ENGINE process (tests/services/gateway/hostile_engine.py; the worker relays what it sends as it
is) or of the built-in test engine, and clients on raw sockets.

- Lying usage (negative, 2**63, fractional, a string; streamed too) is not billed as reported:
  the gateway's own count is, the lie is on the receipt, costs stay within the reservation, and
  after ``misreports_before_exclusion`` lies the operator takes no traffic and says why.
- Over-limit answers (a huge body, a huge event line), answers that are not JSON, and workers
  that never answer or drip get a 502 (or an error event once a stream started), cost nothing,
  and count as failures. An aborted answer's connection is not reused: nothing the worker sends
  on it afterwards is taken for the answer to a later request.
- A client that abandons a stream after N chunks pays for the chunks it was sent.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from ops_tools.services.gateway import store
from tests.conftest import free_port

from .conftest import TOKEN, make_key
from .harness import Gateway, Proc, start_gateway, start_worker, transfer, wait_for
from .test_disconnect import hang_up, send_request

pytestmark = pytest.mark.timeout(600)

LIMITS = {"upstream_max_body_bytes": 65536, "upstream_max_line_bytes": 8192,
          "upstream_timeout_s": 2.0, "upstream_total_timeout_s": 5.0,
          "misreports_before_exclusion": 5, "failures_before_cooldown": 3, "cooldown_s": 120.0}
PROMPT = "count these four words"  # the gateway's count: 4
PER_IN, PER_OUT = 1000, 2000  # the default price: plancks per token (1,000,000 / 2,000,000 per 1k)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, chain) -> Iterator[Gateway]:
    root = tmp_path_factory.mktemp("hostile-gateway")
    gw = start_gateway(root, chain, f"sqlite:///{root / 'gw.sqlite3'}", settle=False,
                       extra=LIMITS)
    try:
        yield gw
    finally:
        gw.proc.stop()


@pytest.fixture(scope="module")
def hostile_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    root = tmp_path_factory.mktemp("hostile-engine")
    proc = Proc([sys.executable, str(Path(__file__).with_name("hostile_engine.py")), "--port",
                 str(port)], root / "engine.log").start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: httpx.get(url + "/v1/models", timeout=2).status_code == 200, 30,
                 "the hostile engine")
        yield url
    finally:
        proc.stop()


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    """The test's worker processes, stopped however the test ends (a failed assertion too)."""
    started: list[Proc] = []
    try:
        yield started
    finally:
        for proc in started:
            proc.stop()


def hostile_worker(procs: list[Proc], tmp_path: Path, chain, gateway: Gateway, engine_url: str,
                   uri: str, models: list[str], **extra):
    w = start_worker(tmp_path, chain, gateway.url, name=uri.strip("/").lower(), dev_uri=uri,
                     register_stake=2 * TOKEN, engine_url=engine_url,
                     extra={"models": models, **extra})
    procs.append(w.proc)
    transfer(chain, "//Alice", w.operator, 5 * TOKEN)
    wait_for(lambda: all(gateway.workers()["live_workers_per_model"].get(m) for m in models),
             90, f"{uri}'s worker to be live")
    return w


def chat(gateway: Gateway, key: str, model: str, *, stream: bool = False) -> httpx.Response:
    return httpx.post(gateway.url + "/v1/chat/completions",
                      headers={"Authorization": f"Bearer {key}"}, timeout=60,
                      json={"model": model, "stream": stream, "max_tokens": 10,
                            "messages": [{"role": "user", "content": PROMPT}]})


def closed_receipts(engine, key: str, n: int) -> list[dict] | None:
    usage = store.usage(engine, key)
    assert usage is not None
    done = [r for r in usage["receipts"] if r["settle_status"] != "open"]
    return done if len(done) == n and usage["reserved"] == 0 else None


def worker_row(gateway: Gateway, operator: str) -> dict:
    return next(w for w in gateway.workers()["workers"] if w["operator"] == operator)


def test_lying_usage_is_billed_by_the_gateways_count_and_excludes_the_liar(
        tmp_path, chain, gateway, engine, hostile_engine, procs):
    lies = ["lie-negative", "lie-huge", "lie-float", "lie-string"]
    w = hostile_worker(procs, tmp_path, chain, gateway, hostile_engine, "//GwLiar", lies)
    key = make_key(engine, budget=10**12)
    for model in lies:
        response = chat(gateway, key, model)
        assert response.status_code == 200, response.text
        assert response.headers["x-net-operator"] == w.operator
    streamed = chat(gateway, key, "lie-negative", stream=True)
    assert streamed.status_code == 200 and streamed.text.rstrip().endswith("data: [DONE]")

    receipts = wait_for(lambda: closed_receipts(engine, key, 5), 30, "five closed receipts")
    for r in receipts:
        # The prompt's four words and the three relayed words (or chunks): never the lie.
        assert (r["input_tokens"], r["output_tokens"]) == (4, 3), r
        assert r["cost"] == 4 * PER_IN + 3 * PER_OUT and r["status"] == "ok"
        assert r["usage_discrepancy"].startswith("usage not billed as reported: prompt_tokens=")
    found = sorted(r["usage_discrepancy"] for r in receipts)
    assert sum("-1000000000 is negative" in d for d in found) == 2
    assert any("9223372036854775808 is over the bound" in d for d in found)
    assert any("1.5 is not an integer" in d for d in found)
    assert any("'7' is not an integer" in d for d in found)
    usage = store.usage(engine, key)
    assert (usage["spent"], usage["reserved"]) == (5 * (4 * PER_IN + 3 * PER_OUT), 0)

    # Five misreports: the operator is excluded, and says why, in the listing and in /ready.
    reason = wait_for(lambda: (worker_row(gateway, w.operator)["reason"] or "").startswith(
        "excluded: 5 usage misreports") and worker_row(gateway, w.operator)["reason"], 10,
        "the liar to be excluded")
    assert "prompt_tokens=" in reason
    ready = httpx.get(gateway.url + "/ready", timeout=10).json()
    [workers_check] = [c for c in ready["checks"] if c["name"] == "workers"]
    assert f"operator {w.operator} excluded: 5 usage misreports" in workers_check["detail"]
    refused = chat(gateway, key, "lie-negative")
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "no_live_worker"
    w.proc.stop()


def test_answers_over_the_limits_get_502_cost_nothing_and_count_failures(
        tmp_path, chain, gateway, engine, hostile_engine, procs):
    w = hostile_worker(procs, tmp_path, chain, gateway, hostile_engine, "//GwHuge", ["huge-body"])
    key = make_key(engine, budget=10**12)
    body = chat(gateway, key, "huge-body")
    assert body.status_code == 502, body.text
    # The worker relays the engine's answer whole, however slowly it came (the hostile engine
    # sends its first 4 KiB, then the rest): with its length, which is over the limit.
    assert body.json()["error"]["message"].endswith(
        f"is {2 * 1024 * 1024 + 11} bytes; the limit is 65536")
    line = chat(gateway, key, "huge-body", stream=True)
    assert line.status_code == 200  # the stream had started: its end is an error event
    assert "limit of 8192 bytes" in line.text and "[DONE]" not in line.text
    # The third failure in a row: the worker cools down.
    assert chat(gateway, key, "huge-body").status_code == 502
    assert worker_row(gateway, w.operator)["reason"].startswith("cooling down")
    receipts = wait_for(lambda: closed_receipts(engine, key, 3), 30, "three closed receipts")
    assert all(r["cost"] == 0 and r["status"] == "failed" for r in receipts)
    assert store.usage(engine, key)["spent"] == 0
    w.proc.stop()


def test_an_answer_that_is_not_json_gets_502_costs_nothing_and_counts_a_failure(
        tmp_path, chain, gateway, engine, hostile_engine, procs):
    """A cut-off answer (what the worker relayed when it read only the first part of a long
    answer) is not an answer: it was relayed with a 200 and its prompt billed."""
    w = hostile_worker(procs, tmp_path, chain, gateway, hostile_engine, "//GwGarbage", ["not-json"])
    key = make_key(engine, budget=10**12)
    garbage = chat(gateway, key, "not-json")
    assert garbage.status_code == 502, garbage.text
    assert garbage.json()["error"]["message"].endswith("is not a JSON object")
    [receipt] = wait_for(lambda: closed_receipts(engine, key, 1), 30, "the closed receipt")
    assert (receipt["cost"], receipt["status"]) == (0, "failed")
    assert store.usage(engine, key)["spent"] == 0
    w.proc.stop()


def test_silent_and_dripping_workers_time_out_unbilled(
        tmp_path, chain, gateway, engine, hostile_engine, procs):
    w = hostile_worker(procs, tmp_path, chain, gateway, hostile_engine, "//GwSlow",
                       ["silent", "drip"])
    key = make_key(engine, budget=10**12)
    silent = chat(gateway, key, "silent")
    assert silent.status_code == 502 and silent.json()["error"]["code"] == "upstream_error"
    drip = chat(gateway, key, "drip", stream=True)  # valid chunks, too slowly, forever
    assert drip.status_code == 200
    assert drip.text.count('"drip "') >= 2 and "[DONE]" not in drip.text
    assert '"error"' in drip.text.strip().splitlines()[-1]  # ended by an error event
    receipts = wait_for(lambda: closed_receipts(engine, key, 2), 30, "two closed receipts")
    assert all(r["cost"] == 0 and r["status"] == "failed" for r in receipts)
    assert store.usage(engine, key)["spent"] == 0
    w.proc.stop()


def test_abandoned_streams_pay_for_the_chunks_they_were_sent(tmp_path, chain, gateway, engine):
    w = start_worker(tmp_path, chain, gateway.url, name="abandon", dev_uri="//GwAbandon",
                     register_stake=2 * TOKEN,
                     extra={"models": ["abandon-model"], "test_engine_token_delay_ms": 30})
    transfer(chain, "//Alice", w.operator, 5 * TOKEN)
    wait_for(lambda: gateway.workers()["live_workers_per_model"].get("abandon-model"), 90,
             "the worker to be live")
    key = make_key(engine, budget=10**12)
    try:
        for n in (3, 12, 40):
            sock = send_request(gateway, key, {
                "model": "abandon-model", "stream": True, "max_tokens": 200,
                "messages": [{"role": "user", "content": PROMPT}]})
            seen = b""
            while seen.count(b"data: ") < n:
                data = sock.recv(65536)
                assert data, "the stream ended early"
                seen += data
            hang_up(sock)
        receipts = wait_for(lambda: closed_receipts(engine, key, 3), 60, "three receipts")
        billed = sorted(r["output_tokens"] for r in receipts)
        for n, chunks in zip((3, 12, 40), billed, strict=True):
            # At least what the client read; a few more may have left before the hang-up
            # was noticed (they were sent), never the whole 200.
            assert n <= chunks <= n + 20, billed
        for r in receipts:
            assert r["status"] == "partial" and r["input_tokens"] == 4
            assert r["cost"] == 4 * PER_IN + r["output_tokens"] * PER_OUT
            assert r["error"] == f"client disconnected after {r['output_tokens']} chunks"
        usage = store.usage(engine, key)
        assert usage["reserved"] == 0 and usage["spent"] == sum(r["cost"] for r in receipts)
    finally:
        w.proc.stop()


def test_a_request_lost_in_a_crash_is_reconciled_at_the_next_start(
        tmp_path, chain, hostile_engine, procs):
    """The gateway is killed (SIGKILL) while a request waits on a silent worker: its receipt
    stays open and its reservation held. The next start closes the receipt, charges nothing
    and releases the reservation."""
    from ops_tools.services.gateway.database import open_database

    root = tmp_path / "gw"
    url = f"sqlite:///{root / 'gw.sqlite3'}"
    gw = start_gateway(root, chain, url, settle=False, extra={"upstream_timeout_s": 120.0})
    db = open_database(url, pool_size=2)
    w = None
    try:
        w = hostile_worker(procs, tmp_path, chain, gw, hostile_engine, "//GwCrash", ["silent"])
        key = make_key(db.engine, budget=10**12)
        sock = send_request(gw, key, {"model": "silent", "max_tokens": 10,
                                      "messages": [{"role": "user", "content": PROMPT}]})
        wait_for(lambda: store.usage(db.engine, key)["reserved"] > 0, 30, "the reservation")
        [receipt] = store.usage(db.engine, key)["receipts"]
        assert receipt["settle_status"] == "open"
        gw.proc.kill()  # SIGKILL: no shutdown, no final write
        gw.proc.proc.wait(timeout=10)
        sock.close()
        assert store.usage(db.engine, key)["reserved"] > 0  # held by nobody now
        # Restarted with short bounds, so the lost request is past its longest life at once.
        gw = start_gateway(root, chain, url, settle=False, extra={
            "upstream_total_timeout_s": 0.5, "open_receipt_grace_s": 0.0,
            "reconcile_interval_s": 0.5})
        usage = wait_for(lambda: store.usage(db.engine, key)["reserved"] == 0
                         and store.usage(db.engine, key), 30, "the reservation to be released")
        [receipt] = usage["receipts"]
        assert (receipt["status"], receipt["cost"], usage["spent"]) == ("failed", 0, 0)
        assert "reconciled" in receipt["error"] and receipt["settle_status"] == "pending"
    finally:
        if w is not None:
            w.proc.stop()
        gw.proc.stop()
        db.dispose()


def test_a_chunked_answer_is_cut_at_the_limit():
    """Without a Content-Length the body is counted as it arrives: a worker streaming an
    endless chunked body is refused once it passes the limit (a real loopback server)."""
    import asyncio

    import aiohttp
    from aiohttp import web

    from ops_tools.services.gateway.bounded import OverLimit, read_bounded

    sent = {"bytes": 0}

    async def endless(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        chunks = int(request.query["chunks"])
        for _ in range(chunks):
            await response.write(b"x" * 16384)
            sent["bytes"] += 16384
        await response.write_eof()
        return response

    async def run() -> None:
        app = web.Application()
        app.router.add_get("/", endless)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            async with aiohttp.ClientSession() as client:
                async with client.get(f"http://127.0.0.1:{port}/?chunks=3") as small:
                    assert small.content_length is None
                    assert await read_bounded(small, 65536) == b"x" * 49152
                async with client.get(f"http://127.0.0.1:{port}/?chunks=100000") as big:
                    with pytest.raises(OverLimit, match="limit of 65536 bytes"):
                        await read_bounded(big, 65536)
        finally:
            await runner.cleanup()

    asyncio.run(run())
    assert sent["bytes"] < 100000 * 16384  # the gateway stopped reading long before the end


def test_an_aborted_answer_leaves_nothing_for_the_next_request_on_its_connection():
    """A hostile worker answers over the limit (every byte of it arrives at once), then sends a
    forged answer on the same connection while it sits idle. The connection of an aborted answer
    is closed, never pooled: the next request gets its own answer, on a new connection, not the
    forgery (a raw loopback server, the gateway's own upstream client and reading function)."""
    import asyncio
    from types import SimpleNamespace

    from ops_tools.services.gateway.bounded import OverLimit, read_answer
    from ops_tools.services.gateway.config import GatewaySettings
    from ops_tools.services.gateway.service import GatewayState

    gateway_side = SimpleNamespace(fields=GatewaySettings(
        listen_port=1, state_dir="/nonexistent", worker_secret_file="/nonexistent",
        allow_private_endpoints=True))

    forged = b'{"forged": true}'
    closed: list[int] = []
    big_conns: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = writer.get_extra_info("peername")[1]
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                path = head.split(b" ", 2)[1]
                if path == b"/big":
                    big_conns.append(conn)
                    body = b'{"pad": "' + b"x" * 70_000 + b'"}'
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
                    await writer.drain()
                    await asyncio.sleep(0.3)  # the gateway has stopped reading by now
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 b"Content-Length: %d\r\n\r\n%s" % (len(forged), forged))
                    await writer.drain()
                else:
                    body = b'{"own": true, "conn": %d}' % conn
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            closed.append(conn)
        finally:
            writer.close()

    async def run() -> tuple[bytes, list[int]]:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with GatewayState.upstream_client(gateway_side) as client:
                big = await client.post(f"http://127.0.0.1:{port}/big", data=b"{}")
                await asyncio.sleep(0.1)  # the whole over-limit body is in the gateway's buffer
                with pytest.raises(OverLimit, match="70011 bytes; the limit is 65536"):
                    await read_answer(big, 65536)
                await asyncio.sleep(0.6)  # the forged answer has been sent by now
                after = await client.post(f"http://127.0.0.1:{port}/small", data=b"{}")
                own = await read_answer(after, 65536)
                for _ in range(50):  # the server notices the close
                    if closed:
                        break
                    await asyncio.sleep(0.05)
                return own, list(closed)
        finally:
            server.close()
            await server.wait_closed()

    own, closed_before_the_end = asyncio.run(run())
    assert own.startswith(b'{"own": true'), own  # its own answer, not the forgery
    assert orjson.loads(own)["conn"] != big_conns[0]  # on a new connection
    assert closed_before_the_end == big_conns  # the aborted answer's connection was closed

"""Stopping gracefully without Docker: the worker's server (``DrainingServer``) in a thread of
the test, in front of the built-in TEST ENGINE streaming slowly; SIGTERM's handler is called as
the signal would call it. The stream in flight runs to its end, new requests are refused while
it does (503, which the gateway retries elsewhere), the liveness duties stop first, and the
server exits; a drain that outlasts its timeout is cut short."""

from __future__ import annotations

import signal
import threading
import time

import httpx
import pytest
import uvicorn

from ops_tools.worker import app as server
from ops_tools.worker.drain import Drain, DrainingServer
from ops_tools.worker.engines import EngineFront, make_engine
from tests.conftest import free_port

MODEL = "test-model"


class Running:
    def __init__(self, timeout_s: float, token_delay_ms: int) -> None:
        self.drain = Drain()
        self.events: list[str] = []

        async def on_drain() -> None:
            self.events.append(f"liveness stopped with {self.drain.inflight} in flight")

        engine = EngineFront([make_engine("test", "test", [MODEL], token_delay_ms)])
        app = server.build_app(engine, None, drain=self.drain)
        self.port = free_port()
        config = uvicorn.Config(self.drain.wrap(app), host="127.0.0.1", port=self.port,
                                log_level="warning", timeout_graceful_shutdown=5)
        self.server = DrainingServer(config, self.drain, timeout_s, on_drain)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "did not start"
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.thread.is_alive():
            self.server.should_exit = self.server.force_exit = True
            self.thread.join(30)


@pytest.fixture
def running(request):
    timeout_s, delay_ms = request.param
    r = Running(timeout_s, delay_ms)
    try:
        yield r
    finally:
        r.stop()


def _stream(url: str, max_tokens: int):
    return httpx.stream("POST", url + "/v1/completions", timeout=60, json={
        "model": MODEL, "prompt": "hello", "max_tokens": max_tokens, "stream": True})


@pytest.mark.parametrize("running", [(60.0, 40)], indirect=True)
def test_sigterm_drains_the_stream_in_flight_then_exits(running):
    lines: list[str] = []
    with _stream(running.url, 40) as response:
        assert response.status_code == 200
        body = response.iter_lines()
        lines.append(next(line for line in body if line.startswith("data:")))
        running.server.handle_exit(signal.SIGTERM, None)
        # Draining: a new request and the health checks are refused, the stream goes on.
        refused = httpx.post(running.url + "/v1/completions", timeout=10,
                             json={"model": MODEL, "prompt": "x", "max_tokens": 2})
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "draining"
        assert httpx.get(running.url + "/health", timeout=10).status_code == 503
        assert httpx.get(running.url + "/ready", timeout=10).status_code == 503
        assert running.thread.is_alive()
        lines.extend(line for line in body if line.startswith("data:"))
    assert lines[-1] == "data: [DONE]"
    assert len(lines) > 10
    running.thread.join(30)
    assert not running.thread.is_alive()
    assert running.events == ["liveness stopped with 1 in flight"]
    with pytest.raises(httpx.ConnectError):
        httpx.get(running.url + "/health", timeout=5)


@pytest.mark.parametrize("running", [(60.0, 0)], indirect=True)
def test_sigterm_when_idle_exits_at_once(running):
    assert httpx.get(running.url + "/health", timeout=10).status_code == 200
    running.server.handle_exit(signal.SIGTERM, None)
    running.thread.join(30)
    assert not running.thread.is_alive()
    assert running.events == ["liveness stopped with 0 in flight"]


@pytest.mark.parametrize("running", [(0.5, 200)], indirect=True)
def test_a_drain_longer_than_its_timeout_is_cut_short(running):
    # 400 tokens at 200 ms each: 80 s, far beyond the drain's 0.5 s and uvicorn's own 5 s.
    with _stream(running.url, 400) as response:
        body = response.iter_lines()
        next(line for line in body if line.startswith("data:"))
        running.server.handle_exit(signal.SIGTERM, None)
        running.thread.join(30)
        assert not running.thread.is_alive()
        with pytest.raises(httpx.HTTPError):
            for _line in body:
                pass


@pytest.mark.parametrize("running", [(60.0, 200)], indirect=True)
def test_a_second_signal_stops_at_once(running):
    with _stream(running.url, 400) as response:
        body = response.iter_lines()
        next(line for line in body if line.startswith("data:"))
        running.server.handle_exit(signal.SIGTERM, None)
        running.server.handle_exit(signal.SIGINT, None)
        running.thread.join(30)
        assert not running.thread.is_alive()

"""The gateway's pooled connection to a worker survives a pause: the worker's server (with the
settings ``net-worker`` runs it with) keeps an idle keep-alive connection open longer than the
gateway's pool keeps one, so the gateway closes first. With uvicorn's default (5 s) the worker
closed it at every pause of 5 s: the gateway's next request paid a new connection on the path
to the first token, or raced the close and counted as a worker failure."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from ops_tools.services.gateway.service import UPSTREAM_KEEPALIVE_S
from ops_tools.worker import app as server
from ops_tools.worker import cli
from ops_tools.worker.drain import Drain, DrainingServer
from ops_tools.worker.engines import EngineFront, make_engine
from tests.conftest import free_port

# Longer than uvicorn's default keep-alive (5 s), which closed the connection.
PAUSE_S = 6.5


@pytest.fixture
def worker_url():
    drain = Drain()
    app = server.build_app(EngineFront([make_engine("test", "test", ["m"], 0)]), None,
                           drain=drain)
    port = free_port()
    running = DrainingServer(cli._config(drain.wrap(app), "127.0.0.1", port, "warning"), drain,
                             10.0)
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not running.started:
        assert time.monotonic() < deadline and thread.is_alive(), "did not start"
        time.sleep(0.05)
    try:
        yield port
    finally:
        running.should_exit = running.force_exit = True
        thread.join(30)


def _get(sock: socket.socket) -> bytes:
    """One GET /health on ``sock``; its status line, or b"" when the worker closed it."""
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: worker\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        piece = sock.recv(65536)
        if not piece:
            return b""
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        piece = sock.recv(65536)
        if not piece:
            return b""
        body += piece
    return head.split(b"\r\n", 1)[0]


def test_an_idle_connection_from_the_gateway_outlives_a_pause(worker_url):
    with socket.create_connection(("127.0.0.1", worker_url), timeout=30) as sock:
        assert _get(sock) == b"HTTP/1.1 200 OK"
        time.sleep(PAUSE_S)
        # The same connection still answers: the worker did not close it while idle.
        assert _get(sock) == b"HTTP/1.1 200 OK"


def test_the_gateway_closes_an_idle_connection_before_the_worker_does():
    assert cli.KEEP_ALIVE_S > UPSTREAM_KEEPALIVE_S

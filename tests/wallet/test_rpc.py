"""Endpoint resolution and the one-line failure for endpoints that do not answer like a node."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ops_tools.errors import InputError
from ops_tools.wallet import rpc
from ops_tools.wallet.errors import RpcUnreachableError
from tests.conftest import free_port


def test_precedence_flag_over_env_over_default():
    env = {"NET_RPC_URL": "ws://10.0.0.1:9944"}
    assert rpc.resolve_rpc_url(None, {}) == "ws://127.0.0.1:9944"
    assert rpc.resolve_rpc_url(None, env) == "ws://10.0.0.1:9944"
    assert rpc.resolve_rpc_url("wss://rpc.example.org", env) == "wss://rpc.example.org"
    assert rpc.resolve_rpc_url(None, {"NET_RPC_URL": ""}) == "ws://127.0.0.1:9944"


@pytest.mark.parametrize(("flag", "env", "needle"), [
    ("127.0.0.1:9944", {}, "--rpc-url: '127.0.0.1:9944'"),
    ("ftp://host", {}, "--rpc-url: 'ftp://host'"),
    ("ws://", {}, "--rpc-url: 'ws://'"),
    ("ws://host:port", {}, "invalid port"),
    (None, {"NET_RPC_URL": "localhost"}, "NET_RPC_URL: 'localhost'"),
])
def test_malformed_urls_are_refused_naming_the_source(flag, env, needle):
    with pytest.raises(InputError) as err:
        rpc.resolve_rpc_url(flag, env)
    assert needle in str(err.value)


def test_submitting_needs_websocket():
    rpc.require_websocket("ws://127.0.0.1:9944")
    with pytest.raises(InputError, match="needs a WebSocket"):
        rpc.require_websocket("http://127.0.0.1:9944")


def test_closed_port_is_unreachable_naming_the_url():
    url = f"ws://127.0.0.1:{free_port()}"
    with pytest.raises(RpcUnreachableError) as err:
        rpc.connect(url, timeout=5)
    assert url in str(err.value)
    assert "Connection refused" in str(err.value)
    assert err.value.exit_code == 3


@pytest.fixture
def plain_http_server() -> Iterator[str]:
    """Something that listens but is not a node: a web server answering 404 to everything."""

    class NotFound(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_error(404)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"ws://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_web_server_that_is_not_a_node_is_unreachable(plain_http_server):
    with pytest.raises(RpcUnreachableError) as err:
        rpc.connect(plain_http_server, timeout=5)
    assert plain_http_server in str(err.value)


@pytest.fixture
def silent_server() -> Iterator[str]:
    """Accepts TCP connections and never says a word (a hung node or a black-holing proxy)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    try:
        yield f"ws://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


def test_a_silent_endpoint_times_out_with_one_line(silent_server):
    with pytest.raises(RpcUnreachableError) as err:
        rpc.connect(silent_server, timeout=1)
    assert f"RPC {silent_server}: no answer within 1 s" in str(err.value)

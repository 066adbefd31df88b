"""The chain client's error paths: an unreachable node, a JSON-RPC error, a wait that times out."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from ops_tools.chain.rpc import RpcClient, RpcError
from ops_tools.chain.status import WaitTimeout, wait_finality_advances, wait_for
from ops_tools.chain.urls import http_url
from tests.conftest import free_port


def test_websocket_urls_are_asked_over_http():
    assert http_url("ws://127.0.0.1:9944") == "http://127.0.0.1:9944"
    assert http_url("wss://rpc.example.invalid") == "https://rpc.example.invalid"


def test_unreachable_node_names_the_url():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(RpcError, match=f"{url}: cannot reach the node"):
        RpcClient(url, timeout=2).genesis_hash()


class _ErrorNode(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        reply = {
            "jsonrpc": "2.0",
            "id": body["id"],
            "error": {"code": -32601, "message": "Method not found"},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_json_rpc_error_is_reported_with_method_and_code():
    server = HTTPServer(("127.0.0.1", 0), _ErrorNode)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client = RpcClient(f"http://127.0.0.1:{server.server_port}")
        with pytest.raises(
            RpcError, match=r"chain_getBlockHash failed: Method not found \(-32601\)"
        ):
            client.genesis_hash()
    finally:
        server.shutdown()
        server.server_close()


def test_wait_times_out_saying_what_it_waited_for_and_what_it_saw():
    seen = iter(range(100))
    with pytest.raises(WaitTimeout, match=r"waiting for block 99; last seen: at #\d+"):
        wait_for("block 99", lambda: (False, f"at #{next(seen)}"), timeout_s=0.3, interval_s=0.05)


def test_wait_returns_what_it_saw_when_done():
    assert wait_for("anything", lambda: (True, "done"), timeout_s=1) == "done"


class _FinalizingNode(BaseHTTPRequestHandler):
    """A node whose finalized height grows by one at every chain_getHeader."""

    height = 10

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if request["method"] == "chain_getFinalizedHead":
            result: object = "0x" + "11" * 32
        else:
            type(self).height += 1
            result = {"number": hex(type(self).height)}
        body = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_finality_wait_waits_for_a_node_that_is_still_starting():
    # A drill's recovery asks a node it has just started: refused connections at first are
    # part of the wait, not its failure.
    port = free_port()
    server = HTTPServer(("127.0.0.1", port), _FinalizingNode, bind_and_activate=False)
    server.allow_reuse_address = True
    serving = threading.Event()

    def start_late() -> None:
        time.sleep(1.5)
        server.server_bind()
        server.server_activate()
        serving.set()
        server.serve_forever(poll_interval=0.1)

    thread = threading.Thread(target=start_late, daemon=True)
    thread.start()
    try:
        start, reached = wait_finality_advances(f"http://127.0.0.1:{port}", 20, blocks=2,
                                                interval_s=0.2)
        assert reached >= start + 2
    finally:
        if serving.wait(5):
            server.shutdown()
        thread.join(5)
        server.server_close()

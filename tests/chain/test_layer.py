"""The chain-access layer: URL helpers, the size bound of the sync client, keypairs from secret
files, and the SubstrateInterface factory against a running development node (timeouts, the
chain's own ss58 format, metadata decoded once per runtime)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from ops_tools.chain import substrate as chain_substrate
from ops_tools.chain.keys import keypair_from_file, keypair_from_secret
from ops_tools.chain.rpc import RpcClient, RpcError
from ops_tools.chain.urls import http_url, is_websocket, ws_url
from ops_tools.errors import InputError
from tests.support.devnode import DevNode, run_devnode

ALICE = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"


def test_url_helpers_swap_only_the_scheme():
    assert ws_url("http://127.0.0.1:9944") == "ws://127.0.0.1:9944"
    assert ws_url("https://rpc.example.invalid/x") == "wss://rpc.example.invalid/x"
    assert http_url(ws_url("https://h:1/p")) == "https://h:1/p"
    assert ws_url("ws://h:1") == "ws://h:1"
    assert http_url("unix:///run/node.sock") == "unix:///run/node.sock"
    assert is_websocket("wss://h") and not is_websocket("https://h")


class _FloodingNode(BaseHTTPRequestHandler):
    """A hostile endpoint: answers every call with an endless JSON string."""

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{"jsonrpc": "2.0", "id": 1, "result": "')
        try:
            while True:
                self.wfile.write(b"x" * 65536)
        except OSError:  # the client stopped reading and closed
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def flooding_node() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _FloodingNode)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def test_an_endless_answer_is_refused_at_the_bound(flooding_node: str):
    client = RpcClient(flooding_node, timeout=10, max_bytes=1024 * 1024)
    with pytest.raises(RpcError, match=r"chain_getBlockHash answered more than 1048576 bytes"):
        client.genesis_hash()


def test_keypair_from_a_secret_file(tmp_path: Path):
    secret = tmp_path / "seed"
    secret.write_text("//Alice\n")
    secret.chmod(0o600)
    assert keypair_from_file(secret, key="seed_file").ss58_address == ALICE


def test_a_world_readable_secret_file_is_refused(tmp_path: Path):
    secret = tmp_path / "seed"
    secret.write_text("//Alice\n")
    secret.chmod(0o644)
    with pytest.raises(InputError, match=r"seed_file: .*mode 0644 lets others read it"):
        keypair_from_file(secret, key="seed_file")


def test_a_bad_secret_names_the_field_but_never_the_secret():
    with pytest.raises(InputError) as err:
        keypair_from_secret("not a valid phrase at all", key="settlement_seed_file")
    assert "settlement_seed_file" in str(err.value)
    assert "valid phrase" not in str(err.value)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevNode]:
    with run_devnode(tmp_path_factory.mktemp("chain-devnode"), ["--dev"]) as running:
        yield running


@pytest.mark.process
@pytest.mark.parametrize("scheme", ["http", "ws"])
def test_factory_connects_with_the_chains_ss58_format(node: DevNode, scheme: str):
    url = node.http if scheme == "http" else node.ws
    substrate = chain_substrate.connect(url, timeout_s=10)
    try:
        assert substrate.ss58_format == node_ss58(node)
        assert chain_substrate.ss58_prefix(substrate) == 42
        substrate.init_runtime()
        assert substrate.ss58_encode(bytes(32)).startswith("5C4hrfjw")
    finally:
        substrate.close()


def node_ss58(node: DevNode) -> int:
    return int(RpcClient(node.http).call("system_properties")["ss58Format"])


@pytest.mark.process
def test_a_second_connection_reuses_the_decoded_metadata(node: DevNode):
    first = chain_substrate.connect(node.http, timeout_s=10)
    second = chain_substrate.connect(node.http, timeout_s=10)
    try:
        first.init_runtime()
        second.init_runtime()
        # Decoded once for the process: the second connection holds the same object.
        assert second.metadata is first.metadata
    finally:
        first.close()
        second.close()


def test_a_node_that_never_answers_fails_the_call_within_the_timeout():
    with socket.socket() as listener:  # accepts (the kernel's backlog) and never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        with pytest.raises(OSError):  # requests' ReadTimeout is an OSError
            chain_substrate.connect(url, timeout_s=0.5)

"""The chain-access layer: URL helpers, the size bound of the sync client, keypairs from secret
files, and the SubstrateInterface factory against a running development node (timeouts, the
chain's own ss58 format, metadata decoded once per runtime)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from scalecodec.base import RuntimeConfigurationObject
from substrateinterface import Keypair

from ops_tools.chain import substrate as chain_substrate
from ops_tools.chain.keys import keypair_from_file, keypair_from_secret
from ops_tools.chain.rpc import RpcClient, RpcError
from ops_tools.chain.urls import http_url, is_websocket, ws_url
from ops_tools.errors import InputError
from tests.support.devnode import DevNode, run_devnode

ALICE = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"
BOB = "5FHneW46xGXgs5mUiveU4sbTyGBzmstUspZC92UhjJM694ty"


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


@pytest.mark.process
def test_a_client_signs_while_another_thread_loads_its_runtime(
        node: DevNode, monkeypatch: pytest.MonkeyPatch):
    """The faucet's submitter and follower, the gateway's reader and settler: two clients of
    one process on two threads. scalecodec hangs the configuration that last looked a class up
    on the class itself, and a client loading its runtime looks the call class up before its
    registry holds the call's argument types. Here the signer is held just after it looked the
    call class up, the other client loads its runtime up to that point and is held there (as a
    busy processor would hold them), and the signer goes on: its call must still encode with its
    own types, and the node accept it."""
    signer = chain_substrate.connect(node.http, timeout_s=10)
    other = chain_substrate.connect(node.http, timeout_s=10)
    alice = Keypair.create_from_uri("//Alice")
    signer.init_runtime()
    args = {"dest": BOB, "value": 10**12}
    probe = signer.compose_call("Balances", "transfer_keep_alive", args)
    arg_types = {field.get_type_string() for field in probe.call_function["fields"]}
    signing, other_held, signed = threading.Event(), threading.Event(), threading.Event()
    loader = threading.Thread(target=other.init_runtime)
    lookup = RuntimeConfigurationObject.get_decoder_class

    def holding_lookup(config: RuntimeConfigurationObject, type_string: Any) -> Any:
        found = lookup(config, type_string)
        if getattr(found, "__name__", None) != "GenericCall":
            return found
        if config is signer.runtime_config and signing.is_set() and not loader.is_alive():
            loader.start()
            other_held.wait(30)
        elif config is other.runtime_config and signing.is_set() and not other_held.is_set() \
                and not arg_types <= config.type_registry["types"].keys():
            other_held.set()
            signed.wait(10)
        return found

    monkeypatch.setattr(RuntimeConfigurationObject, "get_decoder_class", holding_lookup)
    nonce = RpcClient(node.http).call("system_accountNextIndex", [alice.ss58_address])
    call = signer.compose_call("Balances", "transfer_keep_alive", args)
    signing.set()
    try:
        xt = signer.create_signed_extrinsic(call=call, keypair=alice, nonce=nonce)
    finally:
        signed.set()
        loader.join(30)
    assert other_held.is_set(), "the other client never looked the call class up with its" \
        " registry incomplete: scalecodec has changed, and this test no longer holds the race open"
    answer = signer.rpc_request("author_submitExtrinsic", [str(xt.data)])["result"]
    assert answer == "0x" + xt.extrinsic_hash.hex()
    other.close()
    signer.close()


def test_a_node_that_never_answers_fails_the_call_within_the_timeout():
    with socket.socket() as listener:  # accepts (the kernel's backlog) and never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        with pytest.raises(OSError):  # requests' ReadTimeout is an OSError
            chain_substrate.connect(url, timeout_s=0.5)

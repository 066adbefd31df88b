"""Pure parts of the genesis_preflight action plugin: where the public endpoint comes from, how
it is asked, and what the operator is told."""

from __future__ import annotations

import importlib.util
import json

import pytest
from ansible.errors import AnsibleActionFail

from ops_tools.chainspec.genesis import compute_genesis
from ops_tools.chainspec.spec import load_spec
from tests.conftest import ROOT
from tests.operator.conftest import Rendered

_PATH = ROOT / "plugins/action/net_genesis_preflight.py"
_SPEC = importlib.util.spec_from_file_location("net_genesis_preflight", _PATH)
plugin = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(plugin)

DEFAULT = "wss://rpc.testnet.invalid"


def test_inventory_variable_beats_environment_beats_default():
    env = {"NET_RPC_URL": "ws://10.0.0.1:9944"}
    assert plugin.resolve_rpc_url("wss://a.example", env, DEFAULT)[0] == "wss://a.example"
    assert plugin.resolve_rpc_url(None, env, DEFAULT) == (
        "ws://10.0.0.1:9944", "environment variable NET_RPC_URL")
    assert plugin.resolve_rpc_url(None, {}, DEFAULT)[0] == DEFAULT
    assert plugin.resolve_rpc_url("", {"NET_RPC_URL": "  "}, DEFAULT)[0] == DEFAULT


@pytest.mark.parametrize(("url", "posted"), [
    ("ws://127.0.0.1:9944", "http://127.0.0.1:9944"),
    ("wss://rpc.example.org", "https://rpc.example.org"),
    ("wss://rpc.example.org:8443/path", "https://rpc.example.org:8443/path"),
    ("http://10.1.2.3:9933", "http://10.1.2.3:9933"),
])
def test_websocket_urls_are_asked_over_http_on_the_same_host_and_port(url, posted):
    assert plugin.check_rpc_url(url, "x") == posted


@pytest.mark.parametrize("url", ["localhost:9944", "ftp://h/x", "ws://", "rpc.example.org"])
def test_a_url_that_is_not_a_node_endpoint_is_named_with_its_source(url):
    with pytest.raises(AnsibleActionFail) as err:
        plugin.check_rpc_url(url, "environment variable NET_RPC_URL")
    assert str(err.value).startswith(f"environment variable NET_RPC_URL: {url!r} is not")
    assert "nothing was installed or started" in str(err.value)


def test_mismatch_message_names_both_hashes_and_the_remediation():
    msg = plugin.mismatch_message("raw.json", "0xaa", "wss://rpc", "0xbb")
    assert "0xaa" in msg and "0xbb" in msg and "wss://rpc" in msg
    assert "built from a different pallet-suite revision" in msg
    assert "rebuild it against the main branch of the pallet-suite" in msg


def test_staging_copies_the_spec_byte_for_byte_and_only_once(specs: dict[str, Rendered],
                                                            tmp_path):
    spec = load_spec(specs["current"].raw)
    info = compute_genesis(spec)
    manifest = plugin.staged_manifest(spec, info, "src", "ws://x")
    staged, changed = plugin.stage(tmp_path, spec, manifest)
    assert changed
    assert (staged / "raw.json").read_bytes() == specs["current"].raw.read_bytes()
    recorded = json.loads((staged / "manifest.json").read_text())
    assert recorded["genesis_hash"] == specs["current"].genesis
    assert recorded["raw_spec_sha256"] == specs["current"].sha256
    assert plugin.stage(tmp_path, spec, manifest) == (staged, False)


def test_a_plain_spec_or_a_wrong_checksum_is_refused(specs: dict[str, Rendered]):
    plain = specs["current"].raw.with_name("plain.json")
    with pytest.raises(AnsibleActionFail, match="is a plain spec"):
        plugin.offline_genesis(plain, load_spec(plain).sha256)
    with pytest.raises(AnsibleActionFail, match="genesis_preflight_chainspec_sha256"):
        plugin.offline_genesis(specs["current"].raw, "0" * 64)

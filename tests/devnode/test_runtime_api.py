"""Runtime API calls through ``state_call`` (metadata versions, V15) and finality after import."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import websocket

from ops_tools.chainspec.runtime import decode_runtime_version
from ops_tools.devnode.runtime.apis import RUNTIME_VERSION
from ops_tools.devnode.runtime.metadata import _V15_TYPES
from tests.devnode.conftest import Node, make_plain_spec, rpc, run

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)


def call(node: Node, method: str, data: str = "0x") -> bytes:
    return bytes.fromhex(str(rpc(node.http, "state_call", [method, data]))[2:])


def scale_decode(type_string: str, data: bytes, v15: bool = False) -> object:
    from scalecodec.base import RuntimeConfiguration, ScaleBytes
    from scalecodec.type_registry import load_type_registry_preset

    rc = RuntimeConfiguration()
    rc.update_type_registry(load_type_registry_preset("core"))
    if v15:
        rc.update_type_registry({"types": _V15_TYPES})
    obj = rc.create_scale_object(type_string, ScaleBytes(data))
    return obj.decode()


def test_metadata_versions_lists_14_and_15(node):
    assert scale_decode("Vec<u32>", call(node, "Metadata_metadata_versions")) == [14, 15]


def test_metadata_at_version_14_is_what_state_get_metadata_serves(node):
    v14 = call(node, "Metadata_metadata_at_version", "0x0e000000")
    assert v14[0] == 1  # Some
    served = bytes.fromhex(str(rpc(node.http, "state_getMetadata"))[2:])
    assert scale_decode("Bytes", v14[1:]) == "0x" + served.hex()
    assert served[:5] == b"meta\x0e"
    # Metadata_metadata: the same V14, as OpaqueMetadata (length-prefixed bytes).
    assert scale_decode("Bytes", call(node, "Metadata_metadata")) == "0x" + served.hex()


def test_metadata_v15_carries_the_v14_pallets_and_types_plus_runtime_apis(node):
    v15 = call(node, "Metadata_metadata_at_version", "0x0f000000")
    assert v15[0] == 1
    inner = bytes.fromhex(str(scale_decode("Bytes", v15[1:]))[2:])
    assert inner[:5] == b"meta\x0f"
    decoded = scale_decode("MetadataV15", inner[5:], v15=True)
    assert isinstance(decoded, dict)
    v14 = scale_decode(
        "MetadataVersioned", bytes.fromhex(str(rpc(node.http, "state_getMetadata"))[2:])
    )
    assert isinstance(v14, tuple)
    v14_body = v14[1]["V14"]
    # One source: every V14 type keeps its id and shape in V15, every pallet its items.
    v14_types = v14_body["types"]["types"]
    assert decoded["types"]["types"][: len(v14_types)] == v14_types
    for p15, p14 in zip(decoded["pallets"], v14_body["pallets"], strict=True):
        assert {k: v for k, v in p15.items() if k != "docs"} == p14
    apis = {a["name"]: [m["name"] for m in a["methods"]] for a in decoded["apis"]}
    assert apis["Metadata"] == ["metadata", "metadata_at_version", "metadata_versions"]
    assert set(apis) == {"Core", "Metadata", "AccountNonceApi", "TransactionPaymentApi"}
    types = {t["id"]: t["type"] for t in decoded["types"]["types"]}
    assert types[decoded["outer_enums"]["error_type"]]["path"] == ["node_runtime", "RuntimeError"]
    call_enum = types[decoded["extrinsic"]["call_type"]]
    assert call_enum["path"] == ["node_runtime", "RuntimeCall"]
    assert "OperatorStake" in [v["name"] for v in call_enum["def"]["variant"]["variants"]]


def test_metadata_at_an_unserved_version_is_none(node):
    assert call(node, "Metadata_metadata_at_version", "0x10000000") == b"\x00"
    assert call(node, "Metadata_metadata_at_version", "0x0d000000") == b"\x00"


def test_core_version_carries_the_runtime_apis(node):
    out = RUNTIME_VERSION.decode_all(call(node, "Core_version"))
    served = rpc(node.http, "state_getRuntimeVersion")
    assert isinstance(served, dict)
    assert out["spec_name"] == served["specName"]
    assert out["spec_version"] == served["specVersion"]
    assert [["0x" + i.hex(), v] for i, v in out["apis"]] == served["apis"]
    # The same bytes, minus the APIs, as the runtime version section of :code.
    assert decode_runtime_version(
        call(node, "Core_version"), None
    ).spec_name == served["specName"]


def test_runtime_call_errors_name_the_method(node):
    with pytest.raises(AssertionError, match="unknown runtime api method 'Nope_nope'"):
        call(node, "Nope_nope")
    with pytest.raises(AssertionError, match="AccountNonceApi_account_nonce: cannot decode"):
        call(node, "AccountNonceApi_account_nonce", "0x0102")


# ---- finality is a step after import ---------------------------------------------------------


@pytest.fixture(scope="module")
def slow_finality_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """One authority, 500 ms slots, votes 1.5 s after import: finality trails the best block."""
    base = tmp_path_factory.mktemp("slowfin")
    spec = make_plain_spec(base / "plain.json", chain_id="slow_fin")
    n = Node(base / "base", str(spec), "--finality-delay", "1500")
    n.start()
    try:
        yield n
    finally:
        n.stop()


def test_a_single_authority_finalizes_after_import_not_with_it(slow_finality_node: Node):
    node = slow_finality_node
    ws = websocket.create_connection(node.ws, timeout=15)
    try:
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "chain_subscribeNewHeads"}))
        assert "result" in json.loads(ws.recv())
        json.loads(ws.recv())  # the head at subscription time (it may be final already)
        imported: list[int] = []
        while len(imported) < 3:
            msg = json.loads(ws.recv())
            number = int(msg["params"]["result"]["number"], 16)
            # Asked as soon as the head is announced: that block is not final yet.
            assert node.finalized() < number
            imported.append(number)
    finally:
        ws.close()
    node.wait_for(lambda: node.finalized() >= imported[-1], what="finality of the seen blocks")


def test_finality_delay_must_be_positive(tmp_path: Path):
    proc = run("--dev", "--finality-delay", "0", "--rpc-port", "0")
    assert proc.returncode == 2
    assert "--finality-delay 0: expected milliseconds from 1 to 60000" in proc.stderr

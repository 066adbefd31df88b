"""The indexer decodes a block on its event loop while a new spec version's decoders are built
on a worker thread. scalecodec hangs the configuration that last looked a class up on the class
itself, and building a registry looks the extrinsic's classes up before the registry holds their
argument types: each version's decoded objects must keep their own types."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from scalecodec.base import RuntimeConfigurationObject
from substrateinterface import Keypair

from ops_tools.chain import substrate as chain_substrate
from ops_tools.chain.rpc import RpcClient
from ops_tools.services.indexer.decode import Runtime
from tests.support.devnode import DevNode

pytestmark = pytest.mark.process  # a development node (tests/process_lane.py)

BOB = "5FHneW46xGXgs5mUiveU4sbTyGBzmstUspZC92UhjJM694ty"


def test_a_block_decodes_while_the_next_versions_decoders_are_built(
        chain: DevNode, monkeypatch: pytest.MonkeyPatch):
    metadata = RpcClient(chain.http).call("state_getMetadata")
    substrate = chain_substrate.connect(chain.http, timeout_s=10)
    try:
        substrate.init_runtime()
        call = substrate.compose_call("Balances", "transfer_keep_alive",
                                      {"dest": BOB, "value": 10**12})
        arg_types = {field.get_type_string() for field in call.call_function["fields"]}
        xt = substrate.create_signed_extrinsic(call=call, keypair=Keypair.create_from_uri("//Bob"),
                                               nonce=7)
    finally:
        substrate.close()
    current = Runtime(1, metadata)
    decoding, next_held, decoded = threading.Event(), threading.Event(), threading.Event()
    built: list[Runtime] = []
    builder = threading.Thread(target=lambda: built.append(Runtime(2, metadata)))
    lookup = RuntimeConfigurationObject.get_decoder_class

    def holding_lookup(config: RuntimeConfigurationObject, type_string: Any) -> Any:
        found = lookup(config, type_string)
        if getattr(found, "__name__", None) != "GenericCall" or not decoding.is_set():
            return found
        if config is current.config and not builder.is_alive():
            builder.start()  # the next version's decoders, up to the call class
            next_held.wait(30)
        elif config is not current.config and not next_held.is_set() \
                and not arg_types <= config.type_registry["types"].keys():
            next_held.set()
            decoded.wait(10)
        return found

    monkeypatch.setattr(RuntimeConfigurationObject, "get_decoder_class", holding_lookup)
    decoding.set()
    try:
        value = current.decode_extrinsic(str(xt.data))
    finally:
        decoded.set()
        builder.join(30)
    assert next_held.is_set(), "the next version's decoders never looked the call class up" \
        " with their registry incomplete: scalecodec has changed, and this test no longer holds" \
        " the race open"
    assert built, "the next version's decoders were not built"
    assert value["call"]["call_module"] == "Balances"
    assert value["call"]["call_function"] == "transfer_keep_alive"
    args = {arg["name"]: arg["value"] for arg in value["call"]["call_args"]}
    assert args == {"dest": BOB, "value": 10**12}
    assert value["nonce"] == 7

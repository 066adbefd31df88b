"""The signed gateway heartbeat payload: layout of the signed bytes, signing, verification."""

from __future__ import annotations

import copy
import struct

import pytest
import sr25519
from substrateinterface import Keypair
from substrateinterface.utils.ss58 import ss58_decode

from ops_tools.chain.wire.heartbeat import (
    HEARTBEAT_SCHEME,
    canonical_message,
    sign_heartbeat,
    verify_heartbeat_payload,
)

GENESIS = "0x" + "a1" * 32


@pytest.fixture(scope="module")
def alice():
    return Keypair.create_from_uri("//Alice", ss58_format=42)


@pytest.fixture(scope="module")
def payload(alice):
    return sign_heartbeat(alice, epoch=42, timestamp=1_700_000_000, genesis_hash=GENESIS)


def test_canonical_message_layout(alice):
    account = alice.public_key
    message = canonical_message(bytes.fromhex(GENESIS[2:]), account, 42, 1_700_000_000)
    assert len(message) == 16 + 32 + 32 + 8 + 8
    assert message[:16] == b"net-heartbeat-v1"
    assert message[16:48] == bytes.fromhex(GENESIS[2:])
    assert message[48:80] == account
    assert message[80:88] == (42).to_bytes(8, "little")
    assert struct.unpack("<Q", message[88:96]) == (1_700_000_000,)


def test_payload_fields(alice, payload):
    assert set(payload) == {"scheme", "operator", "epoch", "timestamp", "genesis_hash", "signature"}
    assert payload["scheme"] == HEARTBEAT_SCHEME
    assert payload["operator"] == alice.ss58_address
    assert payload["epoch"] == 42
    assert payload["timestamp"] == 1_700_000_000
    assert payload["genesis_hash"] == GENESIS
    assert len(bytes.fromhex(payload["signature"][2:])) == 64


def test_signature_verifies_with_the_account_public_key(payload):
    public_key = bytes.fromhex(ss58_decode(payload["operator"]))
    message = canonical_message(bytes.fromhex(GENESIS[2:]), public_key, 42, 1_700_000_000)
    assert sr25519.verify(bytes.fromhex(payload["signature"][2:]), message, public_key)
    assert verify_heartbeat_payload(payload)
    assert verify_heartbeat_payload(payload, expected_genesis_hash="0x" + GENESIS[2:].upper())


BOB = Keypair.create_from_uri("//Bob", ss58_format=42).ss58_address


@pytest.mark.parametrize(("field", "value"), [
    ("scheme", "net-heartbeat-v2"),
    ("operator", BOB),
    ("epoch", 43),
    ("epoch", 41),
    ("timestamp", 1_700_000_001),
    ("genesis_hash", "0x" + "a1" * 31 + "a2"),
    ("signature", None),  # one bit flipped, below
])
def test_any_altered_field_fails(payload, field, value):
    altered = copy.deepcopy(payload)
    if field == "signature":
        sig = bytearray(bytes.fromhex(payload["signature"][2:]))
        sig[0] ^= 1
        value = "0x" + sig.hex()
    altered[field] = value
    assert altered != payload
    assert not verify_heartbeat_payload(altered)


@pytest.mark.parametrize("mutate", [
    lambda p: p.pop("timestamp"),
    lambda p: p.update(extra="x"),
    lambda p: p.update(epoch=True),
    lambda p: p.update(epoch="42"),
    lambda p: p.update(epoch=-1),
    lambda p: p.update(timestamp=2**64),
    lambda p: p.update(operator="not-an-address"),
    lambda p: p.update(operator=None),
    lambda p: p.update(genesis_hash="a1" * 32),
    lambda p: p.update(signature="0x1234"),
])
def test_malformed_payload_is_false_not_an_exception(payload, mutate):
    altered = copy.deepcopy(payload)
    mutate(altered)
    assert verify_heartbeat_payload(altered) is False


def test_wrong_expected_network_fails(payload):
    assert not verify_heartbeat_payload(payload, expected_genesis_hash="0x" + "00" * 32)


def test_not_a_mapping_is_false():
    assert verify_heartbeat_payload([]) is False  # type: ignore[arg-type]


def test_polkadot_js_wrapped_signature_is_not_accepted(alice, payload):
    # substrate-interface's Keypair.verify also accepts <Bytes>-wrapped signatures; the payload
    # scheme does not, so one signed message has exactly one valid form.
    message = canonical_message(bytes.fromhex(GENESIS[2:]), alice.public_key, 42, 1_700_000_000)
    wrapped = alice.sign(b"<Bytes>" + message + b"</Bytes>")
    forged = dict(payload, signature="0x" + wrapped.hex())
    assert not verify_heartbeat_payload(forged)

"""Recipient validation against substrate-interface's own ss58 codec."""

from __future__ import annotations

import pytest
from substrateinterface import Keypair
from substrateinterface.utils.ss58 import ss58_encode

from ops_tools.services.faucet import ss58

ALICE = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"


def test_a_prefix_42_address_decodes_to_its_account() -> None:
    key = Keypair.create_from_uri("//Alice", ss58_format=42)
    address = ss58.decode(ALICE)
    assert address.prefix == 42
    assert address.account_id == key.public_key


@pytest.mark.parametrize("prefix", [0, 2, 42, 63, 64, 1284, 16383])
def test_encode_matches_substrate_interface(prefix: int) -> None:
    account = bytes(range(32))
    assert ss58.encode(account, prefix) == ss58_encode(account, ss58_format=prefix)
    assert ss58.decode(ss58.encode(account, prefix), prefix).account_id == account


@pytest.mark.parametrize(
    ("text", "code", "needle"),
    [
        ("", "not_ss58", "empty"),
        ("0x" + "00" * 32, "not_ss58", "hex"),
        ("5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQ0", "not_ss58", "base58"),
        ("5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQZ", "bad_checksum", "checksum"),
        ("5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpN", "not_ss58", "32"),
        ("x" * 200, "not_ss58", "too long"),
        (ss58_encode(bytes(32), ss58_format=0), "wrong_network", "prefix 0"),
        (ss58_encode(bytes(32), ss58_format=2), "wrong_network", "prefix 2"),
    ],
)
def test_refusals_name_the_problem(text: str, code: str, needle: str) -> None:
    with pytest.raises(ss58.AddressError) as info:
        ss58.decode(text)
    assert info.value.code == code
    assert needle in str(info.value)

"""One mnemonic -> sr25519 hotkey + EVM key, checked against published vectors."""

from __future__ import annotations

import pytest
from substrateinterface import Keypair

from ops_tools.errors import InputError
from ops_tools.wallet.mnemonic_keys import generate_mnemonic, keys_from_mnemonic

# Substrate's well-known development phrase: its bare (underived) sr25519 key is published in
# the subkey documentation as 5DfhGyQdFobKM8NsWvEeAKk5EQQgYe9AydgJ7rMB6E1EqRzV.
DEV_PHRASE = "bottom drive obey lake curtain smoke basket hold race lonely fit walk"
DEV_PHRASE_SS58 = "5DfhGyQdFobKM8NsWvEeAKk5EQQgYe9AydgJ7rMB6E1EqRzV"
DEV_PHRASE_PUBKEY = "46ebddef8cd9bb167dc30878d7113b7e168e6f0646beffd77d69d39bad76b47a"
# Hardhat/Anvil's default mnemonic; account 0 at m/44'/60'/0'/0/0 is the famous 0xf39F...2266.
HARDHAT_PHRASE = "test test test test test test test test test test test junk"
HARDHAT_ADDRESS = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
# BIP39 test vector phrase; MetaMask's first address for it is 0x9858EfFD...Da94.
ABANDON_PHRASE = "abandon " * 11 + "about"
ABANDON_ETH = "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"


def test_sr25519_hotkey_matches_subkey_vector():
    keys = keys_from_mnemonic(DEV_PHRASE)
    assert keys.ss58_address == DEV_PHRASE_SS58
    assert keys.hotkey.public_key.hex() == DEV_PHRASE_PUBKEY
    assert keys.hotkey.ss58_format == 42


@pytest.mark.parametrize(("phrase", "address"), [(HARDHAT_PHRASE, HARDHAT_ADDRESS),
                                                 (ABANDON_PHRASE, ABANDON_ETH)])
def test_evm_key_uses_bip44_ethereum_path_and_checksums(phrase, address):
    assert keys_from_mnemonic(phrase).eth_address == address


def test_whitespace_and_case_of_a_pasted_phrase_do_not_matter():
    messy = "  Bottom drive\nobey LAKE curtain smoke\tbasket hold race lonely fit walk \n"
    assert keys_from_mnemonic(messy).ss58_address == DEV_PHRASE_SS58


@pytest.mark.parametrize("words", [12, 24])
def test_generated_mnemonic_is_valid_and_gives_distinct_keys(words):
    phrase = generate_mnemonic(words)
    assert len(phrase.split()) == words
    assert Keypair.validate_mnemonic(phrase)
    a, b = keys_from_mnemonic(phrase), keys_from_mnemonic(generate_mnemonic(words))
    assert a.ss58_address != b.ss58_address
    assert a.eth_address != b.eth_address


def test_bad_word_count_is_refused():
    with pytest.raises(InputError, match="--words: 13"):
        generate_mnemonic(13)


@pytest.mark.parametrize(
    ("phrase", "needle"),
    [("abandon " * 12, "bad checksum"),          # 12 valid words, wrong checksum
     ("abandon " * 11 + "notaword", "unknown word"),
     ("abandon about", "has 2 words")],
)
def test_invalid_mnemonic_is_refused_without_echoing_it(phrase, needle):
    with pytest.raises(InputError) as err:
        keys_from_mnemonic(phrase)
    assert needle in str(err.value)
    assert "abandon" not in str(err.value)

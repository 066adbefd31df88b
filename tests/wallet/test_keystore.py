"""Keystore files: formats other tools read, modes, refusals, and atomicity of the pair."""

from __future__ import annotations

import json
import stat

import pytest
from eth_account import Account
from substrateinterface import Keypair

from ops_tools import atomic
from ops_tools.errors import InputError
from ops_tools.wallet.keystore import Keystore, default_keystore_dir
from ops_tools.wallet.mnemonic_keys import keys_from_mnemonic

from .test_mnemonic_keys import DEV_PHRASE, DEV_PHRASE_SS58, HARDHAT_PHRASE

PW = "pass phrase"


@pytest.fixture(scope="module")
def dev_store(tmp_path_factory):
    store = Keystore(tmp_path_factory.mktemp("ks") / "wallet")
    info = store.create("dev", keys_from_mnemonic(DEV_PHRASE), PW)
    return store, info


def test_polkadot_js_json_decrypts_with_substrate_interface(dev_store):
    store, info = dev_store
    doc = json.loads(store.sr25519_path("dev").read_text())
    assert doc["encoding"]["content"] == ["pkcs8", "sr25519"]
    assert doc["encoding"]["type"] == ["scrypt", "xsalsa20-poly1305"]
    assert doc["meta"]["name"] == "dev"
    kp = Keypair.create_from_encrypted_json(doc, PW, ss58_format=42)
    assert kp.ss58_address == info.ss58_address == DEV_PHRASE_SS58
    # The decrypted key signs like the one derived from the mnemonic.
    original = keys_from_mnemonic(DEV_PHRASE).hotkey
    assert original.verify(b"msg", kp.sign(b"msg"))


def test_ethereum_keystore_v3_decrypts_with_eth_account(dev_store):
    store, info = dev_store
    doc = json.loads(store.eth_path("dev").read_text())
    assert doc["version"] == 3
    assert doc["crypto"]["kdf"] == "scrypt"
    key = Account.decrypt(doc, PW)
    assert Account.from_key(key).address == info.eth_address
    assert key == keys_from_mnemonic(DEV_PHRASE).evm.key


def test_files_are_0600_and_directory_0700(dev_store):
    store, _ = dev_store
    assert stat.S_IMODE(store.root.stat().st_mode) == 0o700
    for path in (store.sr25519_path("dev"), store.eth_path("dev")):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_mnemonic_is_not_stored(dev_store):
    store, _ = dev_store
    for path in store.root.iterdir():
        text = path.read_text()
        for word in ("bottom", "curtain", "lonely"):
            assert word not in text


def test_unlock_with_wrong_passphrase_is_a_clear_input_error(dev_store):
    store, _ = dev_store
    with pytest.raises(InputError, match=r"passphrase: wrong passphrase for account 'dev'"):
        store.unlock_hotkey("dev", "nope")
    with pytest.raises(InputError, match=r"passphrase: wrong passphrase"):
        store.unlock_evm("dev", "nope")
    assert store.unlock_hotkey("dev", PW).ss58_address == DEV_PHRASE_SS58


def test_existing_name_is_refused_and_files_untouched(dev_store):
    store, _ = dev_store
    before = {p.name: p.read_bytes() for p in store.root.iterdir()}
    with pytest.raises(InputError, match="'dev' already exists"):
        store.create("dev", keys_from_mnemonic(HARDHAT_PHRASE), PW)
    assert {p.name: p.read_bytes() for p in store.root.iterdir()} == before


def test_unknown_name_is_refused(dev_store):
    store, _ = dev_store
    with pytest.raises(InputError, match="'ghost' not found"):
        store.info("ghost")


def test_half_written_pair_is_rolled_back(tmp_path, monkeypatch):
    store = Keystore(tmp_path / "wallet")
    real_write = atomic.write_bytes
    calls = []

    def failing_second_write(path, data, mode=0o644):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real_write(path, data, mode=mode)

    monkeypatch.setattr(atomic, "write_bytes", failing_second_write)
    with pytest.raises(OSError, match="No space"):
        store.create("half", keys_from_mnemonic(DEV_PHRASE), PW)
    assert len(calls) == 2
    assert list(store.root.iterdir()) == []


def test_empty_passphrase_is_refused(tmp_path):
    store = Keystore(tmp_path / "wallet")
    with pytest.raises(InputError, match="passphrase: empty"):
        store.create("x", keys_from_mnemonic(DEV_PHRASE), "")
    assert not store.root.exists()


def test_names_lists_accounts(tmp_path, dev_store):
    store, _ = dev_store
    assert store.names() == ["dev"]
    assert Keystore(tmp_path / "none").names() == []


def test_keystore_dir_resolution(tmp_path):
    assert default_keystore_dir({"NET_KEYSTORE": str(tmp_path)}) == tmp_path
    assert default_keystore_dir({"XDG_DATA_HOME": "/xdg"}).as_posix() == "/xdg/net/wallet"
    assert default_keystore_dir({}).as_posix().endswith("/.local/share/net/wallet")

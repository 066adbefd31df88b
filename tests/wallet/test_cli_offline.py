"""wallet-cli as a subprocess, for everything that needs no chain (or proves it is unreachable)."""

from __future__ import annotations

import json
import stat

import pytest
from eth_account import Account
from substrateinterface import Keypair

from tests.conftest import free_port

from .conftest import PASSPHRASE, Wallet, assert_clean_failure
from .test_mnemonic_keys import HARDHAT_ADDRESS, HARDHAT_PHRASE

# Starts processes (tests/process_lane.py); no chain and no clock: make test runs these beside
# the workers at the lowest priority (scripts/test-lanes).
pytestmark = [pytest.mark.process, pytest.mark.idle]

ZERO = "0x" + "00" * 32


def test_new_json_writes_readable_keystores_and_shows_mnemonic_once(made_account):
    w, out = made_account
    assert set(out) == {"name", "ss58_address", "eth_address", "sr25519_keystore",
                        "eth_keystore", "mnemonic"}
    words = out["mnemonic"].split()
    assert len(words) == 12
    derived = Keypair.create_from_mnemonic(out["mnemonic"], ss58_format=42)
    assert derived.ss58_address == out["ss58_address"]
    assert out["eth_address"] == Account.from_mnemonic(out["mnemonic"]).address
    sr_doc = json.loads((w.keystore / "op1.sr25519.json").read_text())
    kp = Keypair.create_from_encrypted_json(sr_doc, PASSPHRASE)
    assert kp.ss58_address == out["ss58_address"]
    eth_doc = json.loads((w.keystore / "op1.eth.json").read_text())
    assert Account.from_key(Account.decrypt(eth_doc, PASSPHRASE)).address == out["eth_address"]
    assert stat.S_IMODE(w.keystore.stat().st_mode) == 0o700
    for name in ("op1.sr25519.json", "op1.eth.json"):
        data = (w.keystore / name)
        assert stat.S_IMODE(data.stat().st_mode) == 0o600
        text = data.read_text()
        assert out["mnemonic"] not in text and words[0] + " " + words[1] not in text
        assert PASSPHRASE not in text
    assert sorted(p.name for p in w.keystore.iterdir()) == ["op1.eth.json", "op1.sr25519.json"]


def test_new_human_output_shows_mnemonic_once_on_stdout(wallet):
    result = wallet.run("new", "human")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith("mnemonic (shown this once"))
    mnemonic = lines[index + 1].strip()
    assert Keypair.validate_mnemonic(mnemonic)
    assert result.stdout.count(mnemonic) == 1
    assert mnemonic not in result.stderr
    ss58 = Keypair.create_from_mnemonic(mnemonic, ss58_format=42).ss58_address
    assert f"ss58 address: {ss58}" in result.stdout


def test_import_from_file_and_stdin_gives_the_same_keys(wallet, tmp_path):
    phrase_file = tmp_path / "phrase"
    phrase_file.write_text(HARDHAT_PHRASE + "\n")
    result = wallet.run("import", "hh", "--mnemonic-file", str(phrase_file), "--json")
    assert result.returncode == 0, result.stderr
    first = result.json()
    assert first["eth_address"] == HARDHAT_ADDRESS
    assert "mnemonic" not in first and "junk" not in result.stdout + result.stderr
    again = wallet.run("import", "hh2", "--mnemonic-file", "-", "--json", stdin=HARDHAT_PHRASE)
    assert again.returncode == 0, again.stderr
    assert (again.json()["ss58_address"], again.json()["eth_address"]) == (
        first["ss58_address"], first["eth_address"])
    listed = wallet.run("list", "--json").json()
    assert [a["name"] for a in listed["accounts"]] == ["hh", "hh2"]


def test_import_of_a_bad_mnemonic_writes_nothing_and_does_not_echo_it(wallet):
    bad = "abandon " * 12
    result = wallet.run("import", "bad", "--mnemonic-file", "-", stdin=bad)
    assert_clean_failure(result, 2, "mnemonic:", "bad checksum")
    assert "abandon" not in result.stderr + result.stdout
    assert wallet.snapshot() == {}


def test_existing_name_is_refused_with_nothing_written(made_account):
    w, _ = made_account
    before = w.snapshot()
    result = w.run("new", "op1")
    assert_clean_failure(result, 2, "account name: 'op1' already exists", "nothing was written")
    assert w.snapshot() == before
    assert "mnemonic" not in result.stdout


@pytest.mark.parametrize("name", ["../evil", "a b", ".x", "x" * 65])
def test_unsafe_names_are_refused(wallet, name):
    result = wallet.run("new", name)
    assert_clean_failure(result, 2, f"account name: {name!r}")
    assert wallet.snapshot() == {}


@pytest.mark.parametrize("command", [
    ["address", "ghost"], ["balance", "ghost"],
    ["register-operator", "ghost", "--stake", "1"], ["heartbeat-test", "ghost", "--epoch", "1"],
])
def test_unknown_name_is_refused(made_account, command):
    w, _ = made_account
    before = w.snapshot()
    # A dead RPC port: the name check must come first and not need the chain.
    result = w.run(*command, env={"NET_RPC_URL": f"ws://127.0.0.1:{free_port()}"})
    assert_clean_failure(result, 2, "account name: 'ghost' not found")
    assert w.snapshot() == before


def test_address_and_list(made_account):
    w, out = made_account
    result = w.run("address", "op1")
    assert result.returncode == 0
    assert result.stdout.splitlines() == [
        f"ss58: {out['ss58_address']}", f"eth:  {out['eth_address']}"
    ]
    assert w.run("address", "op1", "--json").json()["eth_address"] == out["eth_address"]
    listed = w.run("list")
    assert listed.stdout.split() == ["op1", out["ss58_address"], out["eth_address"]]


def test_no_passphrase_source_without_a_terminal_fails_and_writes_nothing(tmp_path):
    w = Wallet(tmp_path / "ks", passphrase=None)
    result = w.run("new", "nopw")
    assert_clean_failure(result, 2, "passphrase: none given", "NET_WALLET_PASSPHRASE")
    assert w.snapshot() == {}


def test_passphrase_is_not_accepted_on_the_command_line(wallet):
    result = wallet.run("new", "x", "--passphrase", "visible-in-ps")
    assert result.returncode == 2
    assert "No such option" in result.stderr
    assert wallet.snapshot() == {}


def test_wrong_passphrase_is_a_clear_error(made_account):
    w, _ = made_account
    dead = f"ws://127.0.0.1:{free_port()}"
    for command in (["register-operator", "op1", "--stake", "1000000000000"],
                    ["heartbeat-test", "op1", "--epoch", "1"]):
        result = w.run(*command, "--rpc-url", dead, env={"NET_WALLET_PASSPHRASE": "wrong"})
        assert_clean_failure(result, 2, "passphrase: wrong passphrase for account 'op1'")
        assert "wrong" not in result.stderr.replace("wrong passphrase", "")


def test_passphrase_file_is_used_and_env_ignored(made_account, tmp_path):
    w, _ = made_account
    pw = tmp_path / "pw"
    pw.write_text(PASSPHRASE + "\n")
    pw.chmod(0o600)
    dead = f"ws://127.0.0.1:{free_port()}"
    result = w.run("heartbeat-test", "op1", "--epoch", "1", "--rpc-url", dead,
                   "--passphrase-file", str(pw), env={"NET_WALLET_PASSPHRASE": "wrong"})
    # Unlocked with the file's passphrase, then stopped at the dead endpoint.
    assert_clean_failure(result, 3, f"RPC {dead} unreachable")
    pw.chmod(0o644)
    shared = w.run("heartbeat-test", "op1", "--epoch", "1", "--rpc-url", dead,
                   "--passphrase-file", str(pw))
    assert "readable by group or others" in shared.stderr


@pytest.mark.parametrize(("value", "needle"), [
    ("00" * 32, "lacks the 0x prefix"),
    ("0x" + "00" * 31, "has 62 hex digits"),
    ("0x" + "0" * 65, "has 65 hex digits"),
    ("0x" + "g" * 64, "non-hex characters"),
])
def test_malformed_attestation_hash(made_account, value, needle):
    w, _ = made_account
    before = w.snapshot()
    result = w.run("register-operator", "op1", "--stake", "1000000000000",
                   "--attestation-hash", value)
    assert_clean_failure(result, 2, f"--attestation-hash: {value!r}", needle)
    assert w.snapshot() == before


@pytest.mark.parametrize(("value", "needle"), [
    ("-1", "is negative"), ("1.5", "not a non-negative integer"),
    ("ten", "not a non-negative integer"), ("1e12", "not a non-negative integer"),
])
def test_bad_stake(made_account, value, needle):
    w, _ = made_account
    result = w.run("register-operator", "op1", "--stake", value)
    assert_clean_failure(result, 2, f"--stake: {value!r}", needle)


def test_bad_epoch_and_timestamp(made_account):
    w, _ = made_account
    assert_clean_failure(w.run("heartbeat-test", "op1", "--epoch", "-2"), 2, "--epoch: '-2'")
    assert_clean_failure(w.run("heartbeat-test", "op1", "--epoch", "1", "--timestamp", "soon"),
                         2, "--timestamp: 'soon'")
    assert_clean_failure(
        w.run("heartbeat-test", "op1", "--epoch", "1", "--submit", "--timestamp", "5"),
        2, "--timestamp: only for the payload")


def test_unreachable_rpc_names_the_url_for_every_chain_command(made_account):
    w, _ = made_account
    dead_env = f"ws://127.0.0.1:{free_port()}"
    dead_flag = f"ws://127.0.0.1:{free_port()}"
    from_env = w.run("balance", "op1", env={"NET_RPC_URL": dead_env})
    assert_clean_failure(from_env, 3, f"RPC {dead_env} unreachable")
    for command in (["balance", "op1"],
                    ["register-operator", "op1", "--stake", "1000000000000"],
                    ["heartbeat-test", "op1", "--epoch", "1", "--submit"],
                    ["heartbeat-test", "op1", "--epoch", "1"]):
        from_flag = w.run(*command, "--rpc-url", dead_flag, env={"NET_RPC_URL": dead_env})
        assert_clean_failure(from_flag, 3, f"RPC {dead_flag} unreachable")


def test_default_endpoint_and_http_submit(made_account):
    w, _ = made_account
    result = w.run("register-operator", "op1", "--stake", "1", "--rpc-url", "http://127.0.0.1:9")
    assert_clean_failure(result, 2, "needs a WebSocket")
    result = w.run("balance", "op1", "--rpc-url", "localhost:9944")
    assert_clean_failure(result, 2, "--rpc-url: 'localhost:9944' is not a node RPC URL")

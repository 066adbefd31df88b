"""wallet-cli against a real development node: the onboarding order and every chain refusal.

The node is ``devnode --dev`` (single authority //Alice, endowed //Alice.. //Ferdie) on free
loopback ports; the CLI runs as a subprocess with a keystore in tmp.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator

import pytest

from ops_tools.chain.wire.heartbeat import verify_heartbeat_payload
from tests.support.devnode import DevNode, fund, run_devnode
from tests.support.devnode import rpc as rpc_call

from .conftest import WALLET_CLI, Wallet, assert_clean_failure

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

TOKEN = 10**12
ZERO_HASH = "0x" + "00" * 32


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevNode]:
    with run_devnode(tmp_path_factory.mktemp("devnode"), ["--dev"]) as n:
        yield n


@pytest.fixture(scope="module")
def chain(node: DevNode):
    substrate = node.reader()
    yield substrate
    substrate.close()


@pytest.fixture(scope="module")
def min_stake(chain) -> int:
    return int(chain.get_constant("OperatorStake", "MinStake").value)


@pytest.fixture(scope="module")
def accounts(node: DevNode, tmp_path_factory, min_stake) -> tuple[Wallet, dict[str, str]]:
    """Accounts for the refusal tests, created in parallel (scrypt), funded in one go."""
    w = Wallet(tmp_path_factory.mktemp("accounts") / "keystore")
    names = ["small", "poor", "broke", "twice", "epochs", "notreg"]
    procs = {
        n: subprocess.Popen([str(WALLET_CLI), "new", n, "--json"], env=w.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for n in names
    }
    addresses = {}
    for n, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        addresses[n] = json.loads(out)["ss58_address"]
    fund(node, {
        addresses["small"]: 10 * TOKEN,
        addresses["poor"]: min_stake // 2,  # pays fees, cannot reserve MinStake
        addresses["twice"]: 10 * TOKEN,
        addresses["epochs"]: 10 * TOKEN,
        addresses["notreg"]: 10 * TOKEN,
    })
    return w, addresses


def operator_record(chain, address: str):
    return chain.query("OperatorStake", "Operators", [address]).value


def current_epoch(chain) -> int:
    return int(chain.query("OperatorStake", "CurrentEpoch").value)


def test_onboarding_order_end_to_end(node, chain, min_stake, tmp_path):
    w = Wallet(tmp_path / "keystore")
    rpc = ["--rpc-url", node.ws]

    # 1. create the account
    created = w.run("new", "operator", "--json")
    assert created.returncode == 0, created.stderr
    address = created.json()["ss58_address"]
    before = w.run("balance", "operator", "--json", *rpc)
    assert before.returncode == 0, before.stderr
    assert before.json()["free"] == {"plancks": "0", "tokens": "0"}

    # 2. fund it from an endowed account
    fund(node, {address: 10 * TOKEN})
    funded = w.run("balance", "operator", *rpc)
    assert funded.returncode == 0, funded.stderr
    assert re.search(r"^free:\s+10 \S+ \(10000000000000 plancks\)$", funded.stdout, re.M), (
        funded.stdout)
    assert re.search(r"^reserved:\s+0 \S+ \(0 plancks\)$", funded.stdout, re.M)
    assert re.search(r"^frozen:\s+0 \S+ \(0 plancks\)$", funded.stdout, re.M)

    # 3. (attestation report: the zero hash at bring-up) 4. register at MinStake
    registered = w.run("register-operator", "operator", "--stake", str(min_stake), *rpc)
    assert registered.returncode == 0, registered.stdout + registered.stderr
    out = registered.stdout
    assert re.search(r"^extrinsic: 0x[0-9a-f]{64}$", out, re.M), out
    assert re.search(r"^block:     #\d+ 0x[0-9a-f]{64}$", out, re.M), out
    assert "OperatorStake.OperatorRegistered" in out and "System.ExtrinsicSuccess" in out
    record = operator_record(chain, address)
    assert int(record["stake"]) == min_stake
    assert record["attestation_hash"] == ZERO_HASH
    suggested = int(re.search(r"^next: wallet-cli heartbeat-test operator --submit --epoch (\d+)$",
                              out, re.M).group(1))
    assert suggested == current_epoch(chain) or suggested == current_epoch(chain) - 1
    staked = w.run("balance", "operator", "--json", *rpc).json()
    assert staked["reserved"]["plancks"] == str(min_stake)

    # 5. heartbeat for the current epoch
    epoch = current_epoch(chain)
    beat = w.run("heartbeat-test", "operator", "--submit", "--epoch", str(epoch), "--json", *rpc)
    assert beat.returncode == 0, beat.stdout + beat.stderr
    receipt = beat.json()
    assert receipt["ok"] is True
    assert re.fullmatch(r"0x[0-9a-f]{64}", receipt["extrinsic_hash"])
    assert receipt["block_number"] >= 1
    heartbeats = [e for e in receipt["events"]
                  if (e["pallet"], e["event"]) == ("OperatorStake", "HeartbeatReceived")]
    assert len(heartbeats) == 1 and heartbeats[0]["attributes"]["epoch"] == epoch
    assert int(operator_record(chain, address)["last_heartbeat_epoch"]) == epoch

    # The gateway payload of the same operator verifies against this network's genesis.
    payload_run = w.run("heartbeat-test", "operator", "--epoch", str(epoch), "--timestamp",
                        "1763800000", *rpc)
    assert payload_run.returncode == 0, payload_run.stderr
    payload = payload_run.json()
    genesis = rpc_call(node.http, "chain_getBlockHash", [0])
    assert payload["operator"] == address
    assert (payload["epoch"], payload["timestamp"], payload["genesis_hash"]) == (
        epoch, 1763800000, genesis)
    assert verify_heartbeat_payload(payload, expected_genesis_hash=genesis)
    assert not verify_heartbeat_payload(dict(payload, epoch=epoch + 1))


def test_stake_below_minimum_states_the_minimum(node, chain, accounts, min_stake):
    w, addr = accounts
    before = w.snapshot()
    result = w.run("register-operator", "small", "--stake", str(min_stake - 1),
                   "--rpc-url", node.ws)
    assert_clean_failure(result, 1, "OperatorStake.StakeBelowMinimum")
    assert re.search(rf"MinStake is 1 \S+ \({min_stake} plancks\)", result.stderr), result.stderr
    assert f"--stake {min_stake} or more" in result.stderr
    assert "included but FAILED" in result.stdout and "System.ExtrinsicFailed" in result.stdout
    assert operator_record(chain, addr["small"]) is None
    assert w.snapshot() == before

    as_json = w.run("register-operator", "small", "--stake", "0", "--json",
                    "--rpc-url", node.ws)
    assert as_json.returncode == 1
    body = as_json.json()
    assert body["ok"] is False
    assert (body["error"]["pallet"], body["error"]["name"]) == ("OperatorStake",
                                                                "StakeBelowMinimum")
    assert str(min_stake) in body["error"]["remedy"]


def test_insufficient_balance_points_at_the_faucet(node, chain, accounts, min_stake):
    w, addr = accounts
    result = w.run("register-operator", "poor", "--stake", str(min_stake),
                   env={"NET_RPC_URL": node.ws})
    assert_clean_failure(result, 1, "OperatorStake.InsufficientBalance", "faucet",
                         f"free balance of {addr['poor']}")
    assert operator_record(chain, addr["poor"]) is None


def test_unfunded_account_cannot_pay_the_fee(node, chain, accounts, min_stake):
    w, addr = accounts
    before = w.snapshot()
    result = w.run("register-operator", "broke", "--stake", str(min_stake),
                   "--rpc-url", node.ws)
    assert_clean_failure(result, 1, "rejected by the node before inclusion",
                         "cannot pay the transaction fee", "faucet")
    assert operator_record(chain, addr["broke"]) is None
    assert w.snapshot() == before
    as_json = w.run("heartbeat-test", "broke", "--submit", "--epoch", "0", "--json",
                    "--rpc-url", node.ws)
    assert as_json.returncode == 1
    body = as_json.json()
    assert body["ok"] is False and body["error"]["name"] == "InvalidTransaction"
    assert "faucet" in body["error"]["remedy"]
    assert body["extrinsic_hash"].startswith("0x")


def test_heartbeat_of_an_unregistered_account(node, accounts):
    w, _ = accounts
    result = w.run("heartbeat-test", "notreg", "--submit", "--epoch", "0",
                   "--rpc-url", node.ws)
    assert_clean_failure(result, 1, "OperatorStake.NotRegistered", "register it first")


def test_already_registered_and_epoch_too_far_ahead(node, chain, accounts, min_stake):
    w, addr = accounts
    rpc = ["--rpc-url", node.ws]
    first = w.run("register-operator", "twice", "--stake", str(min_stake), *rpc)
    assert first.returncode == 0, first.stderr
    again = w.run("register-operator", "twice", "--stake", str(min_stake), *rpc)
    assert_clean_failure(again, 1, "OperatorStake.AlreadyRegistered",
                         "with stake 1 ")

    last = int(operator_record(chain, addr["twice"])["last_heartbeat_epoch"])
    ahead = w.run("heartbeat-test", "twice", "--submit", "--epoch", str(last + 2), *rpc)
    assert_clean_failure(ahead, 1, "OperatorStake.HeartbeatEpochTooFarAhead",
                         "epoch - last_heartbeat_epoch <= 1",
                         f"last_heartbeat_epoch of {addr['twice']} is {last}",
                         "current epoch (OperatorStake.CurrentEpoch) is")
    assert int(operator_record(chain, addr["twice"])["last_heartbeat_epoch"]) == last

"""Operator onboarding end to end (tests/operator/onboard_e2e_cases.py) on the local network
itself: ``ops-tools localnet up`` on inventories/local, its fixed ports in the second lane's
network namespace (tests/netns.py), with the must-hold command line that relies on the local
defaults.

Last, on the same network: onboarding never trusts a stale journal. The network purged and
brought up again has the same genesis but none of what the onboarding did; with a new empty
keystore and the old journal, the run stops naming the restore and touches nothing on chain;
with the keystore, it redoes the chain steps (saying why) and registers the account with the new
attestation hash, then stops at the worker that roles/worker deployed, naming the playbook; the
playbook finishes it, and the worker serves requests through the new gateway."""

from __future__ import annotations

import json
import time

import pytest
from substrateinterface import SubstrateInterface

from ops_tools.operator import gateway_client

# The cases and their fixture, in the order they run: pytest keeps the import's order.
# isort: off
from tests.operator.onboard_e2e_cases import (  # noqa: F401
    PASSPHRASE,
    onboarded,
    test_killed_after_attestation_resumes_and_registers_once,
    test_report_and_secrets,
    test_gateway_routes_to_the_worker_and_settlement_pays,
    test_runs_again_repeat_nothing,
)
# isort: on
from tests.operator.conftest import Sshd
from tests.operator.onboard_e2e_cases import NAME, onboard_args, play
from tests.operator.onboard_stacks import BIN, localnet_stack, run

# Two local networks brought up, one after the other.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]
CHAIN_STEPS = ["funding", "attestation", "stake", "daemon", "heartbeat"]


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    """An sshd of this module's own, not the session's: the module runs in the second lane's
    network namespace (tests/netns.py), where the session's sshd, started in the machine's by
    another module of this worker, is not on loopback (and one started here would not be on
    theirs)."""
    server = Sshd(tmp_path_factory.mktemp("sshd"))
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    with localnet_stack(tmp_path_factory.mktemp("onboard-localnet"), PASSPHRASE) as network:
        yield network


def account_state(address: str) -> tuple[int, int, int, dict | None]:
    """(free, reserved, next nonce, OperatorStake record) on the local network."""
    substrate = SubstrateInterface(url="http://127.0.0.1:9944", ss58_format=42)
    try:
        data = substrate.query("System", "Account", [address]).value["data"]
        nonce = substrate.rpc_request("system_accountNextIndex", [address])["result"]
        record = substrate.query("OperatorStake", "Operators", [address]).value
        return int(data["free"]), int(data["reserved"]), int(nonce), record
    finally:
        substrate.close()


def onboard(net: dict, env: dict | None = None):
    return run(onboard_args(net, NAME), env or net["env"])


def test_onboarding_again_on_a_recreated_network_redoes_the_chain_steps(
        onboarded, net, sshd):  # noqa: F811
    old = onboarded["report"]
    address = old["account"]
    down = run([str(BIN / "ops-tools"), "localnet", "down", "--purge", "--yes"], net["env"])
    assert down.returncode == 0, down.stderr
    started = time.monotonic()
    up = run([str(BIN / "ops-tools"), "localnet", "up", "--json"], net["env"], timeout=900)
    assert up.returncode == 0, up.stderr[-3000:]
    print(f"\nlocalnet up again: {time.monotonic() - started:.1f} s")
    # The same spec: the genesis cannot tell the two networks apart.
    assert json.loads(up.stdout)["genesis_hash"] == old["genesis_hash"]
    net["gateway_key"] = json.loads(up.stdout)["gateway_api_key"]  # the new gateway's
    assert account_state(address) == (0, 0, 0, None)

    # A new empty keystore with the old journal: a clear error; nothing on chain.
    empty = net["tmp"] / "empty-keystore"
    refused = onboard(net, {**net["env"], "NET_KEYSTORE": str(empty)})
    assert refused.returncode == 2, refused.stderr
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, refused.stderr
    assert address in errors[0] and f"wallet-cli import {NAME}" in errors[0]
    assert old["mnemonic_backup"] in errors[0]
    assert account_state(address) == (0, 0, 0, None)
    assert not empty.exists() or not any(empty.iterdir())

    # The command alone redoes the chain steps, then stops at the worker: roles/worker deployed
    # it, and its program went with the old network's supervisord.
    second = onboard(net)
    assert second.returncode == 1, second.stderr[-3000:]
    assert "the network was re-created" in second.stderr
    errors = [line for line in second.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "net-worker-op1" in errors[0], second.stderr[-3000:]
    assert "playbooks/operator_worker.yml" in errors[0]
    for why in (f"the chain has no registration for {address}: the network was re-created",
                "does not know report"):
        assert why in second.stderr, second.stderr[-3000:]
    free, reserved, _nonce, on_chain = account_state(address)
    assert on_chain is not None and on_chain["attestation_hash"] != old["attestation_hash"]
    assert reserved == int(old["stake"]) and free > 0

    # As the error says: the playbook converges the worker again and finishes the onboarding.
    resumed, document = play(net, sshd)
    assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-4000:]
    assert document["recap"]["changed"] > 0
    report = document["report"]
    assert report["account"] == address
    assert report["attestation_hash"] == on_chain["attestation_hash"]
    assert "heartbeat" in report["ran"] and not set(report["ran"]) & set(CHAIN_STEPS[:3])

    answer = gateway_client.request_served_by(net["gateway"], net["gateway_key"],
                                              "net-test-chat", address)
    assert answer.status == 200 and answer.operator == address and answer.text

    again = onboard(net)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["ran"] == []

"""Onboarding never trusts a stale journal: the local network purged and brought up again has
the same genesis, but none of what the first onboarding did.

``localnet up``, onboard op1, ``localnet down --purge``, ``localnet up``; then, with a new empty
keystore and the old journal, the run stops naming the restore and touches nothing on chain;
with the keystore, the second run redoes the chain steps (saying why), registers the account
with the new attestation hash, and its worker serves requests through the new gateway. Under
/tmp/net-localnet.lock (fixed ports), with the must-hold command line: everything else is the
local network's default.
"""

from __future__ import annotations

import json
import time

import pytest
from substrateinterface import SubstrateInterface

from ops_tools.operator import gateway_client
from tests.operator.conftest import ONBOARD_PASSPHRASE
from tests.operator.onboard_stacks import BIN, localnet_stack, run

# Two local networks brought up, three onboardings, and the lock, which another run may hold.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]
NAME = "op1"
CHAIN_STEPS = ["funding", "attestation", "stake", "daemon", "heartbeat"]


def onboard(net: dict, env: dict | None = None):
    return run([str(BIN / "ops-tools"), "operator", "onboard", "--name", NAME,
                "--passphrase-file", str(net["pass"]), "--no-gpu", "--test-engine", "--yes",
                "--json", "--state-dir", str(net["tmp"] / f"state-{NAME}")], env or net["env"])


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


def test_onboarding_again_on_a_recreated_network_redoes_the_chain_steps(tmp_path):
    with localnet_stack(tmp_path, ONBOARD_PASSPHRASE) as net:
        first = onboard(net)
        assert first.returncode == 0, first.stderr[-3000:]
        old = json.loads(first.stdout)
        address = old["account"]

        down = run([str(BIN / "ops-tools"), "localnet", "down", "--purge", "--yes"], net["env"])
        assert down.returncode == 0, down.stderr
        started = time.monotonic()
        up = run([str(BIN / "ops-tools"), "localnet", "up", "--json"], net["env"], timeout=900)
        assert up.returncode == 0, up.stderr[-3000:]
        print(f"\nlocalnet up again: {time.monotonic() - started:.1f} s")
        # The same spec: the genesis cannot tell the two networks apart.
        assert json.loads(up.stdout)["genesis_hash"] == old["genesis_hash"]
        assert account_state(address) == (0, 0, 0, None)

        # A new empty keystore with the old journal: a clear error; nothing on chain.
        empty = tmp_path / "empty-keystore"
        refused = onboard(net, {**net["env"], "NET_KEYSTORE": str(empty)})
        assert refused.returncode == 2, refused.stderr
        errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, refused.stderr
        assert address in errors[0] and f"wallet-cli import {NAME}" in errors[0]
        assert old["mnemonic_backup"] in errors[0]
        assert account_state(address) == (0, 0, 0, None)
        assert not empty.exists() or not any(empty.iterdir())

        second = onboard(net)
        assert second.returncode == 0, second.stderr[-3000:]
        new = json.loads(second.stdout)
        assert new["account"] == address
        assert new["skipped"] == ["gpu", "wallet"]
        assert new["ran"] == CHAIN_STEPS
        reasons = {r["step"]: r["reason"] for r in new["redone"]}
        assert set(reasons) == set(CHAIN_STEPS)
        assert f"the chain has no registration for {address}: the network was re-created" \
            == reasons["stake"]
        assert "does not know report" in reasons["attestation"]
        assert "the network was re-created" in second.stderr
        assert new["attestation_hash"] != old["attestation_hash"]
        free, reserved, _nonce, record = account_state(address)
        assert record["attestation_hash"] == new["attestation_hash"]
        assert reserved == int(new["stake"]) and free > 0

        key = (net["tmp"] / "localnet" / "gateway-0" / "secrets" / "dev_api_key").read_text()
        answer = gateway_client.request_served_by(net["gateway"], key.strip(), "net-test-chat",
                                                  address)
        assert answer.status == 200 and answer.operator == address and answer.text

        again = onboard(net)
        assert again.returncode == 0, again.stderr[-3000:]
        assert json.loads(again.stdout)["ran"] == []

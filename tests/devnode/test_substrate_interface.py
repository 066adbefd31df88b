"""substrate-interface, unmodified, over WebSocket against a real devnode process."""

from __future__ import annotations

import subprocess

import pytest
from substrateinterface import Keypair, KeypairType
from substrateinterface.exceptions import SubstrateRequestException

from tests.devnode.conftest import OPS_TOOLS

MIN_STAKE = 1_000_000_000_000
ZERO_HASH = "0x" + "00" * 32


def submit(s, pallet: str, call: str, args: dict, signer: Keypair, **kw):
    xt = s.create_signed_extrinsic(s.compose_call(pallet, call, args), signer, **kw)
    return s.submit_extrinsic(xt, wait_for_inclusion=True)


def free(s, who: str) -> int:
    return s.query("System", "Account", [who]).value["data"]["free"]


def fresh(s, funder: Keypair, amount: int, crypto_type: int = KeypairType.SR25519) -> Keypair:
    kp = Keypair.create_from_mnemonic(Keypair.generate_mnemonic(), crypto_type=crypto_type)
    r = submit(
        s, "Balances", "transfer_keep_alive", {"dest": kp.ss58_address, "value": amount}, funder
    )
    assert r.is_success, r.error_message
    return kp


@pytest.fixture(scope="module")
def alice() -> Keypair:
    return Keypair.create_from_uri("//Alice")


def test_identity_matches_the_spec(substrate, raw_spec, node):
    assert substrate.chain == "Test test_net"
    assert substrate.properties == {"tokenSymbol": "UNIT", "tokenDecimals": 12, "ss58Format": 42}
    version = substrate.rpc_request("state_getRuntimeVersion", [])["result"]
    assert (version["specName"], version["specVersion"], version["stateVersion"]) == (
        "net-dev",
        6,
        1,
    )
    offline = subprocess.run(
        [OPS_TOOLS, "chainspec", "genesis-hash", str(raw_spec)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert substrate.get_block_hash(0) == offline
    assert node.call("chain_getBlockHash", [0]) == offline


def test_transfer_with_receipt_events_and_fee(substrate, alice):
    bob = Keypair.create_from_uri("//Bob")
    before_a, before_b = free(substrate, alice.ss58_address), free(substrate, bob.ss58_address)
    r = submit(
        substrate,
        "Balances",
        "transfer_keep_alive",
        {"dest": bob.ss58_address, "value": 12345},
        alice,
    )
    assert r.is_success
    events = [(e.value["module_id"], e.value["event_id"]) for e in r.triggered_events]
    assert events == [
        ("Balances", "Withdraw"),
        ("Balances", "Transfer"),
        ("TransactionPayment", "TransactionFeePaid"),
        ("System", "ExtrinsicSuccess"),
    ]
    assert r.total_fee_amount > 0
    transfer = r.triggered_events[1].value["attributes"]
    assert (transfer["from"], transfer["to"], transfer["amount"]) == (
        alice.ss58_address,
        bob.ss58_address,
        12345,
    )
    assert free(substrate, bob.ss58_address) == before_b + 12345
    assert free(substrate, alice.ss58_address) == before_a - 12345 - r.total_fee_amount


def test_ed25519_signer_and_mortal_era(substrate, alice):
    ed = fresh(substrate, alice, 5 * MIN_STAKE, KeypairType.ED25519)
    r = submit(
        substrate,
        "Balances",
        "transfer_allow_death",
        {"dest": alice.ss58_address, "value": MIN_STAKE},
        ed,
        era={"period": 64},
    )
    assert r.is_success, r.error_message
    assert free(substrate, ed.ss58_address) == 4 * MIN_STAKE - r.total_fee_amount


def test_register_at_min_stake_and_one_planck_below(substrate, alice):
    op = fresh(substrate, alice, 3 * MIN_STAKE)
    below = submit(
        substrate,
        "OperatorStake",
        "register",
        {"stake": MIN_STAKE - 1, "attestation_hash": ZERO_HASH},
        op,
    )
    assert not below.is_success
    assert below.error_message["name"] == "StakeBelowMinimum"
    assert substrate.query("OperatorStake", "Operators", [op.ss58_address]).value is None
    ok = submit(
        substrate,
        "OperatorStake",
        "register",
        {"stake": MIN_STAKE, "attestation_hash": ZERO_HASH},
        op,
    )
    assert ok.is_success, ok.error_message
    record = substrate.query("OperatorStake", "Operators", [op.ss58_address]).value
    assert record["stake"] == MIN_STAKE and record["attestation_hash"] == ZERO_HASH
    account = substrate.query("System", "Account", [op.ss58_address]).value
    assert account["data"]["reserved"] == MIN_STAKE
    again = submit(
        substrate,
        "OperatorStake",
        "register",
        {"stake": MIN_STAKE, "attestation_hash": ZERO_HASH},
        op,
    )
    assert again.error_message["name"] == "AlreadyRegistered"


def test_register_without_the_funds_fails_by_name(substrate, alice):
    poor = fresh(substrate, alice, MIN_STAKE // 2)
    r = submit(
        substrate,
        "OperatorStake",
        "register",
        {"stake": MIN_STAKE, "attestation_hash": ZERO_HASH},
        poor,
    )
    assert r.error_message["name"] == "InsufficientBalance"


def test_heartbeat_epoch_rule(substrate, alice, node):
    assert substrate.get_constant("OperatorStake", "EpochLength").value == 10
    assert substrate.get_constant("OperatorStake", "MaxHeartbeatEpochAdvance").value == 1
    assert substrate.get_constant("OperatorStake", "MinStake").value == MIN_STAKE
    # Wait for epoch 1, so that an epoch before the current one exists.
    node.wait_for(
        lambda: substrate.query("OperatorStake", "CurrentEpoch").value >= 1, what="epoch 1"
    )
    op = fresh(substrate, alice, 3 * MIN_STAKE)
    unregistered = submit(substrate, "OperatorStake", "heartbeat", {"epoch": 1}, op)
    assert unregistered.error_message["name"] == "NotRegistered"
    assert submit(
        substrate,
        "OperatorStake",
        "register",
        {"stake": MIN_STAKE, "attestation_hash": ZERO_HASH},
        op,
    ).is_success
    current = substrate.query("OperatorStake", "CurrentEpoch").value
    assert current == int(node.call("chain_getHeader")["number"], 16) // 10
    ok = submit(substrate, "OperatorStake", "heartbeat", {"epoch": current}, op)
    assert ok.is_success, ok.error_message
    assert [e.value["event_id"] for e in ok.triggered_events][1] == "HeartbeatReceived"
    last = substrate.query("OperatorStake", "Operators", [op.ss58_address]).value[
        "last_heartbeat_epoch"
    ]
    assert last == current
    ahead = submit(substrate, "OperatorStake", "heartbeat", {"epoch": last + 2}, op)
    assert ahead.error_message["name"] == "HeartbeatEpochTooFarAhead"
    past = submit(substrate, "OperatorStake", "heartbeat", {"epoch": last - 1}, op)
    assert past.error_message["name"] == "HeartbeatEpochInPast"


@pytest.mark.parametrize(
    ("pallet", "call", "args"),
    [
        ("BondingCurve", "quote", {"amount": 7}),
        ("Consensus", "signal", {"round": 3}),
        (
            "Slashing",
            "report_offence",
            {"offender": "5FHneW46xGXgs5mUiveU4sbTyGBzmstUspZC92UhjJM694ty"},
        ),
        ("AttestationRegistry", "submit_attestation", {"report_hash": "0x" + "11" * 32}),
        ("OracleTwap", "submit_price", {"price": 99}),
    ],
)
def test_placeholder_pallets_accept_a_signed_call_without_economic_effect(
    substrate, alice, pallet, call, args
):
    bob = Keypair.create_from_uri("//Bob")
    before_bob = free(substrate, bob.ss58_address)
    before = free(substrate, alice.ss58_address)
    r = submit(substrate, pallet, call, args, alice)
    assert r.is_success, r.error_message
    assert (pallet, "PlaceholderCalled") in [
        (e.value["module_id"], e.value["event_id"]) for e in r.triggered_events
    ]
    assert free(substrate, alice.ss58_address) == before - r.total_fee_amount
    assert free(substrate, bob.ss58_address) == before_bob


def test_invalid_transactions_are_rejected_at_submission(substrate, alice):
    call = substrate.compose_call(
        "Balances", "transfer_keep_alive", {"dest": alice.ss58_address, "value": 1}
    )
    nonce = substrate.get_account_nonce(alice.ss58_address)

    def reject(xt) -> dict:
        with pytest.raises(SubstrateRequestException) as info:
            substrate.submit_extrinsic(xt, wait_for_inclusion=True)
        return info.value.args[0]

    stale = reject(substrate.create_signed_extrinsic(call, alice, nonce=max(nonce - 1, 0)))
    assert (stale["code"], stale["data"]) == (1010, "Transaction is outdated")
    future = reject(substrate.create_signed_extrinsic(call, alice, nonce=nonce + 5))
    assert (future["code"], future["data"]) == (1010, "Transaction will be valid in the future")
    penniless = Keypair.create_from_mnemonic(Keypair.generate_mnemonic())
    unpaid = reject(substrate.create_signed_extrinsic(call, penniless))
    assert unpaid["code"] == 1010 and "pay" in unpaid["data"]
    good = substrate.create_signed_extrinsic(call, alice)
    data = bytearray(good.data.data)
    data[-1] ^= 0x04  # the call's compact value changes (1 -> 2): the signature no longer matches
    with pytest.raises(SubstrateRequestException) as info:
        substrate.rpc_request("author_submitExtrinsic", ["0x" + bytes(data).hex()])
    assert info.value.args[0] == {
        "code": 1010,
        "message": "Invalid Transaction",
        "data": "Transaction has a bad signature",
    }


def test_sudo_force_set_balance_and_require_sudo(substrate, alice):
    target = Keypair.create_from_mnemonic(Keypair.generate_mnemonic())
    inner = substrate.compose_call(
        "Balances", "force_set_balance", {"who": target.ss58_address, "new_free": 7 * MIN_STAKE}
    )
    r = submit(substrate, "Sudo", "sudo", {"call": inner}, alice)
    assert r.is_success
    assert free(substrate, target.ss58_address) == 7 * MIN_STAKE
    bob = Keypair.create_from_uri("//Bob")
    denied = submit(substrate, "Sudo", "sudo", {"call": inner}, bob)
    assert denied.error_message["name"] == "RequireSudo"


def test_storage_queries(substrate, node):
    accounts = {k.value for k, _ in substrate.query_map("System", "Account", page_size=5)}
    assert Keypair.create_from_uri("//Ferdie").ss58_address in accounts
    assert len(accounts) >= 12
    prefix = "0x26aa394eea5630e07c48ae0c9558cef7b99d880ec681799c0cf30e8886371da9"  # System.Account
    keys = node.call("state_getKeysPaged", [prefix, 3, None])
    assert len(keys) == 3 and keys == sorted(keys) and all(k.startswith(prefix) for k in keys)
    assert node.call("state_getStorage", ["0x" + "ab" * 40]) is None
    assert (
        node.call("system_accountNextIndex", [Keypair.create_from_uri("//Eve").ss58_address]) == 0
    )


def test_wait_for_finalization(substrate, alice, node):
    dave = Keypair.create_from_uri("//Dave")
    call = substrate.compose_call(
        "Balances", "transfer_allow_death", {"dest": dave.ss58_address, "value": 777}
    )
    receipt = substrate.submit_extrinsic(
        substrate.create_signed_extrinsic(call, alice), wait_for_finalization=True
    )
    assert receipt.is_success
    included = int(node.call("chain_getHeader", [receipt.block_hash])["number"], 16)
    finalized = int(
        node.call("chain_getHeader", [node.call("chain_getFinalizedHead")])["number"], 16
    )
    assert finalized >= included
    assert node.call("chain_getBlockHash", [included]) == receipt.block_hash


def test_storage_subscription_sees_a_change(substrate, alice, node):
    import threading

    from substrateinterface import SubstrateInterface

    ferdie = Keypair.create_from_uri("//Ferdie")
    before = free(substrate, ferdie.ss58_address)

    def handler(account, update_nr, subscription_id):
        if account.value["data"]["free"] != before:
            return account.value["data"]["free"]
        return None

    def pay() -> None:
        other = SubstrateInterface(url=node.ws)
        try:
            submit(
                other,
                "Balances",
                "transfer_keep_alive",
                {"dest": ferdie.ss58_address, "value": 555},
                alice,
            )
        finally:
            other.close()

    payer = threading.Timer(1.0, pay)
    payer.start()
    try:
        result = substrate.query(
            "System", "Account", [ferdie.ss58_address], subscription_handler=handler
        )
    finally:
        payer.join()
    assert result == before + 555

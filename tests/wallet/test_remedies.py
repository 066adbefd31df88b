"""Remedies: each names the rule, the numbers read from the chain, and the next step."""

from __future__ import annotations

from ops_tools.wallet.errors import Facts, remedy, remedy_for_invalid_transaction

ADDR = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"


def test_stake_below_minimum_states_the_minimum_in_tokens_and_plancks():
    text = remedy("OperatorStake", "StakeBelowMinimum",
                  Facts(ADDR, symbol="UNIT", min_stake=10**12, stake=5))
    assert "MinStake is 1 UNIT (1000000000000 plancks)" in text
    assert "pass --stake 1000000000000 or more" in text
    assert "0.000000000005 UNIT (5 plancks)" in text


def test_insufficient_balance_points_at_the_faucet():
    text = remedy("OperatorStake", "InsufficientBalance",
                  Facts(ADDR, symbol="UNIT", free=2 * 10**11, stake=10**12))
    assert f"free balance of {ADDR} is 0.2 UNIT (200000000000 plancks)" in text
    assert "/drip-public" in text and ADDR in text


def test_epoch_rule_states_rule_numbers_and_current_epoch():
    facts = Facts(ADDR, epoch=9, current_epoch=5, last_heartbeat_epoch=5, max_advance=1)
    text = remedy("OperatorStake", "HeartbeatEpochTooFarAhead", facts)
    assert "epoch 9 is too far ahead" in text
    assert "epoch - last_heartbeat_epoch <= 1" in text
    assert "last_heartbeat_epoch of" in text and "is 5" in text
    assert "current epoch (OperatorStake.CurrentEpoch) is 5" in text
    assert text.endswith("pass --epoch 5")
    past = remedy("OperatorStake", "HeartbeatEpochInPast",
                  Facts(ADDR, epoch=1, current_epoch=6, last_heartbeat_epoch=5, max_advance=1))
    assert "epoch 1 is before the last heartbeat epoch" in past
    assert past.endswith("pass --epoch 6")


def test_epoch_rule_when_current_epoch_is_outside_the_window():
    text = remedy("OperatorStake", "HeartbeatEpochInPast",
                  Facts(ADDR, epoch=1, current_epoch=9, last_heartbeat_epoch=5, max_advance=1))
    assert text.endswith("pass an epoch from 5 to 6")


def test_registration_state_errors():
    text = remedy("OperatorStake", "NotRegistered", Facts(ADDR, name="op7"))
    assert "register it first with `wallet-cli register-operator op7 --stake <plancks>`" in text
    text = remedy("OperatorStake", "AlreadyRegistered",
                  Facts(ADDR, name="op7", symbol="UNIT", registered_stake=10**12, registered_at=7,
                        current_epoch=9, last_heartbeat_epoch=3, max_advance=1))
    assert "already a registered operator with stake 1 UNIT" in text
    assert "registered at block 7" in text
    # Epoch 9 is out of reach from 3; the next allowed heartbeat is 4.
    assert text.endswith("`wallet-cli heartbeat-test op7 --submit --epoch 4`")
    in_window = remedy("OperatorStake", "AlreadyRegistered",
                       Facts(ADDR, name="op7", current_epoch=3, last_heartbeat_epoch=3,
                             max_advance=1))
    assert in_window.endswith("--epoch 3`")


def test_unknown_error_falls_back_to_metadata_name():
    assert "(Foo.Bar)" in remedy("Foo", "Bar", Facts(ADDR))


def test_fee_payment_rejection_points_at_the_faucet():
    text = remedy_for_invalid_transaction(
        "Invalid Transaction: Inability to pay some fees (e.g. account balance too low)",
        Facts(ADDR, symbol="UNIT", free=0),
    )
    assert "cannot pay the transaction fee (free balance 0 UNIT (0 plancks))" in text
    assert "faucet" in text

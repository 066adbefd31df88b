"""Input validation: every refusal names the option and the value."""

from __future__ import annotations

import pytest

from ops_tools.errors import InputError
from ops_tools.wallet import inputs
from ops_tools.wallet.tokens import describe_amount, format_tokens


@pytest.mark.parametrize("name", ["alice", "op-1", "OP_2", "9lives", "a" * 64])
def test_good_account_names(name):
    assert inputs.account_name(name) == name


@pytest.mark.parametrize("name", ["", "../etc", "a/b", ".hidden", "-x", "a b", "a.b", "a" * 65,
                                  "ünïcode"])
def test_bad_account_names(name):
    with pytest.raises(InputError, match="account name: "):
        inputs.account_name(name)


@pytest.mark.parametrize(("text", "value"), [("0", 0), ("1000000000000", 10**12),
                                             ("1_000_000_000_000", 10**12),
                                             (str(2**128 - 1), 2**128 - 1)])
def test_stake_accepts_plancks(text, value):
    assert inputs.stake_plancks(text) == value


@pytest.mark.parametrize(("text", "needle"), [
    ("-1", "is negative"), ("-1_000", "is negative"), ("1.5", "not a non-negative integer"),
    ("1e12", "not a non-negative integer"), ("abc", "not a non-negative integer"),
    ("", "not a non-negative integer"), ("+5", "not a non-negative integer"),
    ("1__0", "not a non-negative integer"), (str(2**128), "larger than the maximum"),
])
def test_stake_refusals_name_option_and_value(text, needle):
    with pytest.raises(InputError) as err:
        inputs.stake_plancks(text)
    assert str(err.value).startswith(f"--stake: {text!r} ")
    assert needle in str(err.value)


def test_epoch_and_timestamp_are_u64():
    assert inputs.epoch("7") == 7
    assert inputs.timestamp(str(2**64 - 1)) == 2**64 - 1
    with pytest.raises(InputError, match="--epoch: '-3' is negative"):
        inputs.epoch("-3")
    with pytest.raises(InputError, match=r"--timestamp: .* larger than the maximum"):
        inputs.timestamp(str(2**64))


def test_h256_accepts_and_lowercases():
    assert inputs.h256("0X" + "AB" * 32) == "0x" + "ab" * 32
    assert inputs.h256(inputs.ZERO_HASH) == "0x" + "0" * 64


@pytest.mark.parametrize(("text", "needle"), [
    ("ab" * 32, "lacks the 0x prefix"),
    ("0x" + "ab" * 31, "has 62 hex digits"),
    ("0x" + "ab" * 33, "has 66 hex digits"),
    ("0x" + "zz" * 32, "non-hex characters"),
    ("0x", "has 0 hex digits"),
])
def test_h256_refusals(text, needle):
    with pytest.raises(InputError) as err:
        inputs.h256(text)
    assert str(err.value).startswith(f"--attestation-hash: {text!r} ")
    assert needle in str(err.value)


@pytest.mark.parametrize(("plancks", "text"), [
    (0, "0"), (1, "0.000000000001"), (10**12, "1"), (1_500_000_000_000, "1.5"),
    (123_456_789_012_345_678, "123456.789012345678"),
    (2**128 - 1, "340282366920938463463374607.431768211455"),
    (-5 * 10**11, "-0.5"),
])
def test_format_tokens_is_exact(plancks, text):
    assert format_tokens(plancks) == text


def test_describe_amount():
    assert describe_amount(10**12, "UNIT") == "1 UNIT (1000000000000 plancks)"

"""``wallet-cli fund NAME`` against a running faucet: the onboarding's second step."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.services.faucet.conftest import DRIP, Running, faucet_config, run_faucet
from tests.support.devnode import DevNode, free_balance
from tests.wallet.conftest import Wallet, assert_clean_failure


@pytest.fixture(scope="module")
def faucet(funded_faucet: DevNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with run_faucet(faucet_config(tmp_path_factory.mktemp("fund"), funded_faucet)) as running:
        yield running


def test_fund_asks_the_faucet_and_prints_the_drip(
    faucet: Running, funded_faucet: DevNode, tmp_path: Path
) -> None:
    wallet = Wallet(tmp_path / "keystore")
    made = wallet.run("new", "op1", "--json")
    assert made.returncode == 0, made.stderr
    address = made.json()["ss58_address"]
    funded = wallet.run("fund", "op1", "--json", env={"NET_FAUCET_URL": faucet.url})
    assert funded.returncode == 0, funded.stderr
    body = funded.json()
    assert body["name"] == "op1" and body["recipient"] == address
    assert body["amount"]["plancks"] == str(DRIP)
    assert free_balance(funded_faucet.reader(), address) == DRIP

    again = wallet.run("fund", "op1", "--faucet-url", faucet.url)
    assert_clean_failure(again, 1, "429", "recipient_limit", "next drip is allowed")


def test_fund_prints_a_readable_summary(faucet: Running, tmp_path: Path) -> None:
    wallet = Wallet(tmp_path / "keystore")
    assert wallet.run("new", "op2").returncode == 0
    result = wallet.run("fund", "op2", "--faucet-url", faucet.url)
    assert result.returncode == 0, result.stderr
    assert "funded op2" in result.stdout and "2 NET" in result.stdout
    assert "block:" in result.stdout and "next: wallet-cli balance op2" in result.stdout

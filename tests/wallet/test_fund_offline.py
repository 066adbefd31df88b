"""``wallet-cli fund`` without a faucet: URL resolution and the one-line failures."""

from __future__ import annotations

import pytest

from ops_tools.errors import InputError
from ops_tools.wallet.faucet_client import DEFAULT_FAUCET_URL, resolve_faucet_url
from tests.conftest import free_port
from tests.wallet.conftest import Wallet, assert_clean_failure


def test_flag_beats_environment_beats_default() -> None:
    env = {"NET_FAUCET_URL": "http://127.0.0.1:9001/"}
    assert resolve_faucet_url("https://faucet.example", env) == "https://faucet.example"
    assert resolve_faucet_url(None, env) == "http://127.0.0.1:9001"
    assert resolve_faucet_url(None, {}) == DEFAULT_FAUCET_URL


@pytest.mark.parametrize("url", ["ws://127.0.0.1:9944", "127.0.0.1:8001", "http://h:port"])
def test_bad_urls_name_the_source(url: str) -> None:
    with pytest.raises(InputError) as info:
        resolve_faucet_url(url, {})
    assert "--faucet-url" in str(info.value) and url in str(info.value)


def test_bad_url_from_the_environment_is_named(made_account: tuple[Wallet, dict]) -> None:
    wallet, _ = made_account
    result = wallet.run("fund", "op1", env={"NET_FAUCET_URL": "ftp://x"})
    assert_clean_failure(result, 2, "NET_FAUCET_URL", "ftp://x")


def test_unreachable_faucet_is_one_line(made_account: tuple[Wallet, dict]) -> None:
    wallet, _ = made_account
    url = f"http://127.0.0.1:{free_port()}"
    result = wallet.run("fund", "op1", "--faucet-url", url)
    assert_clean_failure(result, 1, url, "unreachable")


def test_unknown_account(made_account: tuple[Wallet, dict]) -> None:
    wallet, _ = made_account
    result = wallet.run("fund", "nobody", "--faucet-url", "http://127.0.0.1:1")
    assert result.returncode != 0 and "nobody" in result.stderr

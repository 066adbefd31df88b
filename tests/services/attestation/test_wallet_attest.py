"""``wallet-cli attest`` refusals: one clear line, non-zero exit, nothing sent to a wrong place;
and the wallet's signed request against ``net-attestation`` as a process. (The working path,
attest then register-operator, runs in tests/services/explorer.)"""

from __future__ import annotations

import pytest
from substrateinterface import Keypair

from ops_tools.errors import OpsError
from ops_tools.wallet.attest import request_report
from tests.conftest import free_port
from tests.services.explorer.processes import run_service
from tests.support.devnode import rpc as rpc_call
from tests.wallet.conftest import Wallet

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)


@pytest.fixture(scope="module")
def wallet(tmp_path_factory) -> Wallet:
    w = Wallet(tmp_path_factory.mktemp("attest") / "keystore")
    assert w.run("new", "op1").returncode == 0
    return w


def test_bad_url_is_input_error(wallet):
    res = wallet.run("attest", "op1", "--attestation-url", "ftp://example")
    assert res.returncode == 2
    assert res.stderr.strip().startswith("error: --attestation-url: 'ftp://example'")
    res = wallet.run("attest", "op1", env={"NET_ATTESTATION_URL": "nowhere"})
    assert res.returncode == 2 and "NET_ATTESTATION_URL" in res.stderr


def test_unreachable_service_is_one_line(wallet):
    url = f"http://127.0.0.1:{free_port()}"
    res = wallet.run("attest", "op1", "--attestation-url", url, "--timeout", "3")
    assert res.returncode == 1 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach it" in lines[0] and url in lines[0]


def test_unknown_account(wallet):
    res = wallet.run("attest", "nobody", "--attestation-url", "http://127.0.0.1:9")
    assert res.returncode != 0 and "nobody" in res.stderr


def test_the_wallets_signed_request_counts_against_its_account_not_its_address(
        tmp_path, devnode, seed_file):
    """No unsigned request from this address is allowed at all (ip_limit 0); the operator's
    signed one still gets its report, once (account_limit 1)."""
    config = {"rpc_url": devnode.ws, "mock_root_seed_file": str(seed_file), "ip_limit": 0,
              "account_limit": 1, "log_level": "warning"}
    operator = Keypair.create_from_uri("//WalletSignedOperator")
    genesis = rpc_call(devnode.http, "chain_getBlockHash", [0])
    with run_service("attestation", tmp_path / "svc", config) as svc:
        with pytest.raises(OpsError, match=r"HTTP 429: ip: at most 0"):
            request_report(svc.url, "wallet-op", operator.ss58_address, 10)
        result = request_report(svc.url, "wallet-op", operator.ss58_address, 10,
                                signer=operator, genesis_hash=genesis)
        assert result.report["account"] == operator.ss58_address
        assert result.report["genesis_hash"] == genesis
        with pytest.raises(OpsError, match=r"HTTP 429: account: at most 1"):
            request_report(svc.url, "wallet-op", operator.ss58_address, 10,
                           signer=operator, genesis_hash=genesis)

"""``wallet-cli attest`` refusals: one clear line, non-zero exit, nothing sent to a wrong place.
(The working path, attest then register-operator, runs in tests/services/explorer.)"""

from __future__ import annotations

import pytest

from tests.conftest import free_port
from tests.wallet.conftest import Wallet


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

"""Every refusal of ``ops-tools operator onboard`` stops with one ``error:`` line and changes
nothing on chain (balance, nonce, registration), against every service on free loopback ports
(``onboard_stacks.ports_stack``: no fixed ports, no lock)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from substrateinterface import SubstrateInterface

from tests.conftest import ROOT, free_port
from tests.operator.onboard_stacks import BIN, TOKEN
from tests.services.gateway.harness import secret_file

pytestmark = pytest.mark.slow


@pytest.fixture
def stack(ports_net):
    return ports_net


def onboard(stack: dict, name: str, passfile: Path, *extra: str) -> subprocess.CompletedProcess:
    args = list(stack["onboard_extra"])
    for i in range(0, len(extra), 2):  # a later flag wins in Typer; replace to keep argv plain
        if extra[i] in args:
            args[args.index(extra[i]) + 1] = extra[i + 1]
        else:
            args += [extra[i], extra[i + 1]]
    argv = [str(BIN / "ops-tools"), "operator", "onboard", "--name", name, "--passphrase-file",
            str(passfile), "--no-gpu", "--test-engine", "--yes", "--json", "--state-dir",
            str(stack["tmp"] / f"state-{name}"), *args]
    return subprocess.run(argv, capture_output=True, text=True, env=stack["env"], cwd=ROOT,
                          timeout=600, check=False)


def wallet(stack: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "wallet-cli"), *args], env=stack["env"],
                          capture_output=True, text=True, timeout=120, check=False)


def on_chain(stack: dict, name: str) -> tuple[int, int, bool]:
    """(free + reserved, next nonce, registered) of the account ``name``."""
    keystore = Path(stack["env"]["NET_KEYSTORE"])
    address = json.loads((keystore / f"{name}.sr25519.json").read_text())["address"]
    substrate = SubstrateInterface(url=stack["rpc_http"], ss58_format=42)
    try:
        data = substrate.query("System", "Account", [address]).value["data"]
        nonce = substrate.rpc_request("system_accountNextIndex", [address])["result"]
        registered = substrate.query("OperatorStake", "Operators", [address]).value
        return int(data["free"]) + int(data["reserved"]), int(nonce), bool(registered)
    finally:
        substrate.close()


def refused(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_refusals_stop_with_one_line_and_change_nothing_on_chain(stack, tmp_path):
    passfile = secret_file(tmp_path / "pass", "refusal test passphrase")
    keystore = Path(stack["env"]["NET_KEYSTORE"])

    # Stake below MinStake: refused before anything, not even an account.
    low = onboard(stack, "op-low", passfile, "--stake", "1")
    assert low.returncode == 2
    assert "--stake: 1 plancks is below MinStake" in refused(low)
    assert not (keystore / "op-low.sr25519.json").exists()

    # Wrong passphrase for an existing account: the wallet step stops; no drip, no extrinsic.
    other = secret_file(tmp_path / "other", "another passphrase")
    assert wallet(stack, "new", "op-wp", "--passphrase-file", str(other)).returncode == 0
    wrong = onboard(stack, "op-wp", passfile)
    assert wrong.returncode == 2 and "wrong passphrase" in refused(wrong)
    assert on_chain(stack, "op-wp") == (0, 0, False)

    # The faucet's limit: funded once already, a larger stake needs a second drip.
    assert wallet(stack, "new", "op-fl", "--passphrase-file", str(passfile)).returncode == 0
    assert wallet(stack, "fund", "op-fl", "--faucet-url", stack["faucet"]).returncode == 0
    funded = on_chain(stack, "op-fl")
    limited = onboard(stack, "op-fl", passfile, "--stake", str(50 * TOKEN))
    assert limited.returncode == 1
    line = refused(limited)
    assert "faucet refused (429 recipient_limit)" in line and "missing" in line
    assert on_chain(stack, "op-fl") == funded

    # The attestation service is down: stops at attestation, nothing registered or signed.
    down = onboard(stack, "op-ad", passfile, "--attestation-url",
                   f"http://127.0.0.1:{free_port()}")
    assert down.returncode == 1 and "cannot reach" in refused(down)
    balance, nonce, registered = on_chain(stack, "op-ad")
    assert balance > 0 and nonce == 0 and not registered  # the drip only

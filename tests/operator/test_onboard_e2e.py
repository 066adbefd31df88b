"""Operator onboarding end to end on the local network (inventories/local), from nothing.

Real processes only: ``ops-tools localnet up`` (nodes, faucet, attestation service, gateway,
indexer and //Operator1's worker under the network's supervisord), then ``ops-tools operator
onboard`` as an operator runs it: killed once right after its attestation step, then resumed by
``playbooks/operator_worker.yml`` over SSH (this machine as the "remote" GPU server, through the
suite's throwaway sshd), which runs the same command on the host; the worker joins the local
network's supervisord. Fixed ports: the module holds /tmp/net-localnet.lock
(tests/localnet_lock.py) from ``up`` to ``down``.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from substrateinterface import SubstrateInterface

from ops_tools.operator import gateway_client
from tests.conftest import ROOT
from tests.localnet_lock import localnet_lock
from tests.operator.conftest import PYTHON, RECAP, VENV_BIN, Sshd

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
RPC_HTTP = "http://127.0.0.1:9944"
GATEWAY = "http://127.0.0.1:8005"
PASSPHRASE = "onboarding test passphrase 7f3a"
NAME = "op1"
# //Ferdie: the local gateway's settlement account (inventories/local/group_vars/gateways.yml).
SETTLEMENT_ACCOUNT = "5CiPPseXPECbkjWCa6MnjNokrgYjMqmKndv2rSnekmSK2DjL"


def run(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=timeout, check=False)


def onboard_args(net: dict, name: str, *extra: str) -> list[str]:
    return [str(BIN / "ops-tools"), "operator", "onboard", "--name", name,
            "--passphrase-file", str(net["pass"]), "--no-gpu", "--test-engine", "--yes", "--json",
            "--state-dir", str(net["tmp"] / f"state-{name}"), *extra]


def chain() -> SubstrateInterface:
    return SubstrateInterface(url=RPC_HTTP, ss58_format=42)


def record(address: str) -> dict | None:
    substrate = chain()
    try:
        result = substrate.query("OperatorStake", "Operators", [address])
        return result.value if result is not None else None
    finally:
        substrate.close()


def account_state(address: str) -> tuple[int, int]:
    """(free + reserved, next nonce) of ``address``."""
    substrate = chain()
    try:
        data = substrate.query("System", "Account", [address]).value
        nonce = substrate.rpc_request("system_accountNextIndex", [address])["result"]
        return int(data["data"]["free"]) + int(data["data"]["reserved"]), int(nonce)
    finally:
        substrate.close()


def register_calls(address: str, first_block: int) -> int:
    substrate = chain()
    try:
        head = substrate.get_block_number(substrate.get_chain_head())
        count = 0
        for number in range(first_block, head + 1):
            for xt in substrate.get_block(block_number=number)["extrinsics"]:
                value = xt.value
                call = value.get("call", {})
                if value.get("address") == address and call.get("call_module") == \
                        "OperatorStake" and call.get("call_function") == "register":
                    count += 1
        return count
    finally:
        substrate.close()


def settlement(account: str, since: int, timeout: float = 90) -> tuple[int, int]:
    """(block, amount) of the first settlement transfer to ``account`` after block ``since``."""
    substrate = chain()
    deadline = time.monotonic() + timeout
    number = since
    try:
        while time.monotonic() < deadline:
            head = substrate.get_block_number(substrate.get_chain_head())
            while number <= head:
                block_hash = substrate.get_block_hash(number)
                for event in substrate.get_events(block_hash):
                    value = event.value
                    attrs = value.get("attributes") or {}
                    if (value["module_id"], value["event_id"]) == ("Balances", "Transfer") and \
                            attrs.get("to") == account and attrs.get("from") == SETTLEMENT_ACCOUNT:
                        return number, int(attrs["amount"])
                number += 1
            time.sleep(1)
    finally:
        substrate.close()
    raise AssertionError(f"no settlement transfer to {account} within {timeout} s")


def balance_change(account: str, number: int) -> tuple[int, int]:
    """(free + reserved at ``number`` minus at ``number - 1``, fees ``account`` paid in it)."""
    substrate = chain()
    try:
        totals = []
        for n in (number - 1, number):
            data = substrate.query("System", "Account", [account],
                                   block_hash=substrate.get_block_hash(n)).value["data"]
            totals.append(int(data["free"]) + int(data["reserved"]))
        fees = 0
        for event in substrate.get_events(substrate.get_block_hash(number)):
            value = event.value
            attrs = value.get("attributes") or {}
            if value["event_id"] == "TransactionFeePaid" and attrs.get("who") == account:
                fees += int(attrs.get("actual_fee", 0)) + int(attrs.get("tip", 0))
        return totals[1] - totals[0], fees
    finally:
        substrate.close()


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("onboard")
    env = {**os.environ, "NET_LOCALNET_DIR": str(tmp / "localnet"),
           "NET_KEYSTORE": str(tmp / "keystore")}
    env.pop("NET_WALLET_PASSPHRASE", None)
    passfile = tmp / "passphrase"
    passfile.write_text(PASSPHRASE + "\n")
    passfile.chmod(0o600)
    with localnet_lock():
        started = time.monotonic()
        up = run([str(BIN / "ops-tools"), "localnet", "up", "--json"], env, timeout=900)
        try:
            assert up.returncode == 0, up.stderr[-3000:]
            print(f"\nlocalnet up: {time.monotonic() - started:.1f} s")
            yield {"env": env, "tmp": tmp, "pass": passfile, "up": json.loads(up.stdout)}
        finally:
            down = run([str(BIN / "ops-tools"), "localnet", "down", "--purge", "--yes"], env)
            assert down.returncode == 0, down.stderr


def play(net: dict, sshd: Sshd) -> tuple[subprocess.CompletedProcess, dict]:
    """playbooks/operator_worker.yml for op1 on this machine over SSH; (result, the report the
    onboarding left on the host, the recap's counts)."""
    local = Path(net["env"]["NET_LOCALNET_DIR"])
    host = {
        "ansible_host": sshd.host, "ansible_port": sshd.port, "ansible_user": "root",
        "ansible_connection": "paramiko", "ansible_become": False,
        "ansible_ssh_private_key_file": str(sshd.client_key),
        "ansible_python_interpreter": str(PYTHON),
        "ansible_remote_tmp": str(net["tmp"] / "remote-tmp"),
        "operator_name": NAME, "operator_passphrase": PASSPHRASE,
        "operator_gateway_secret": (local / "worker-0" / "secrets" / "gateway_secret").read_text(),
        "operator_gateway_api_key": net["up"]["gateway_api_key"],
        "operator_test_engine": True, "operator_no_gpu": True,
        "operator_rpc_url": "ws://127.0.0.1:9944", "operator_faucet_url": "http://127.0.0.1:8001",
        "operator_attestation_url": "http://127.0.0.1:8002", "operator_gateway_url": GATEWAY,
        "operator_venv": str(VENV_BIN.parent),
        "operator_state_dir": str(net["tmp"] / f"state-{NAME}"),
        "operator_keystore_dir": net["env"]["NET_KEYSTORE"],
        "operator_service_manager": "supervisor",
        "operator_supervisor_conf": str(local / "supervisor" / "supervisord.conf"),
        "operator_worker_host": "127.0.0.1", "operator_worker_port": 8111,
    }
    inventory = net["tmp"] / "gpu-hosts.yml"
    inventory.write_text(yaml.safe_dump(
        {"all": {"children": {"operator_workers": {"hosts": {"gpu-0": host}}}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "NET_"))}
    env.update(HOME=str(sshd.home), ANSIBLE_NOCOLOR="1")
    result = run([str(VENV_BIN / "ansible-playbook"), "-i", "inventories/operator", "-i",
                  str(inventory), "--limit", "gpu-0", "playbooks/operator_worker.yml"], env)
    report_path = net["tmp"] / f"state-{NAME}" / "report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    recap = {m["host"]: {k: int(m[k]) for k in ("ok", "changed", "failed")}
             for m in RECAP.finditer(result.stdout)}
    return result, {"report": report, "recap": recap.get("gpu-0", {})}


@pytest.fixture(scope="module")
def onboarded(net, sshd):
    """op1 onboarded: the first run (the CLI) killed (SIGKILL) once its journal records the
    attestation step done, the second run by the playbook over SSH, to the end."""
    env = net["env"]
    journal_path = net["tmp"] / f"state-{NAME}" / "journal.json"
    substrate = chain()
    first_block = substrate.get_block_number(substrate.get_chain_head())
    substrate.close()
    started = time.monotonic()
    first = subprocess.Popen(onboard_args(net, NAME), cwd=ROOT, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
    killed_at: dict | None = None
    try:
        while first.poll() is None and time.monotonic() - started < 300:
            try:
                journal = json.loads(journal_path.read_text())
            except (OSError, ValueError):
                journal = {}
            if any(s["name"] == "attestation" and s["status"] == "done"
                   for s in journal.get("steps", [])):
                os.killpg(first.pid, signal.SIGKILL)
                killed_at = journal
                break
            time.sleep(0.02)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
        out, err = first.communicate(timeout=30)
    assert killed_at is not None, f"the first run ended before its attestation step: {err}"
    first_s = time.monotonic() - started
    second_started = time.monotonic()
    second, document = play(net, sshd)
    assert second.returncode == 0, (second.stdout + second.stderr)[-4000:]
    assert document["recap"]["changed"] > 0
    print(f"\nonboarding: first run {first_s:.1f} s to the kill, second run (playbook)"
          f" {time.monotonic() - second_started:.1f} s")
    return {"killed_at": killed_at, "report": document["report"],
            "stderr": err + second.stderr,
            "stdout": out + second.stdout, "first_block": first_block,
            "journal_path": journal_path}


def test_killed_after_attestation_resumes_and_registers_once(onboarded):
    killed = [s["name"] for s in onboarded["killed_at"]["steps"] if s["status"] == "done"]
    assert killed[:4] == ["gpu", "wallet", "funding", "attestation"]
    report = onboarded["report"]
    assert report["skipped"] == killed  # what was done before the kill is not repeated
    assert report["ran"] + report["skipped"] == [
        "gpu", "wallet", "funding", "attestation", "stake", "daemon", "heartbeat"]
    journal = json.loads(onboarded["journal_path"].read_text())
    names = [s["name"] for s in journal["steps"]]
    assert names == ["gpu", "wallet", "funding", "attestation", "stake", "daemon", "heartbeat"]
    assert all(s["status"] == "done" for s in journal["steps"])
    assert all(s["attempts"] == 1 for s in journal["steps"][:4])
    assert register_calls(report["account"], onboarded["first_block"]) == 1
    on_chain = record(report["account"])
    assert on_chain["attestation_hash"] == report["attestation_hash"]
    assert int(on_chain["stake"]) == int(report["stake"]) == int(report["min_stake"])


def test_report_and_secrets(onboarded, net):
    report = onboarded["report"]
    assert report["account"].startswith("5") and len(report["account"]) == 48
    assert len(report["attestation_hash"]) == 66 and report["attestation_mock_root"]
    assert report["worker_url"] == "http://127.0.0.1:8111"
    assert "net-test-chat" in report["models"]
    assert report["gateway_view"]["live"] is True
    assert report["gpu"]["no_gpu"] is True
    state = net["tmp"] / f"state-{NAME}"
    for secret in (state / "secrets" / "passphrase", state / "secrets" / "gateway_secret",
                   state / "worker.yml", onboarded["journal_path"]):
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600, secret
    keystore = Path(net["env"]["NET_KEYSTORE"])
    assert {stat.S_IMODE(p.stat().st_mode) for p in keystore.iterdir()} == {0o600}
    mnemonic = (state / "secrets" / f"{NAME}.mnemonic").read_text().strip()
    texts = [onboarded["journal_path"].read_text(), onboarded["stderr"], onboarded["stdout"],
             (state / "worker.log").read_text()]
    for text in texts:
        assert PASSPHRASE not in text and mnemonic not in text


def test_gateway_routes_to_the_worker_and_settlement_pays(onboarded, net):
    """The rise is read at the settlement's block: on the local network a test request earns a
    few ten thousand plancks while every epoch's heartbeat costs the operator a fee of about
    10^8, so the balance over a longer span falls; the settlement's block shows the rise."""
    account = onboarded["report"]["account"]
    substrate = chain()
    since = substrate.get_block_number(substrate.get_chain_head())
    substrate.close()
    answer = gateway_client.request_served_by(GATEWAY, net["up"]["gateway_api_key"],
                                              "net-test-chat", account)
    assert answer.status == 200 and answer.operator == account and answer.text
    block, amount = settlement(account, since)  # the local gateway settles every 10 s
    rise, fees = balance_change(account, block)
    assert amount > 0 and rise + fees == amount
    if fees == 0:  # no heartbeat of the operator in that block
        assert rise > 0
    status = run([str(BIN / "ops-tools"), "operator", "status", "--name", NAME, "--json"],
                 net["env"])
    assert status.returncode == 0, status.stderr
    out = json.loads(status.stdout)
    assert out["registered"] and out["worker_live"]
    assert out["last_heartbeat_epoch"] >= out["current_epoch"] - 1
    assert int(out["earnings_settled"]["plancks"]) > 0


def test_runs_again_repeat_nothing(onboarded, net, sshd):
    replay, document = play(net, sshd)
    assert replay.returncode == 0, replay.stdout[-3000:]
    assert document["recap"]["changed"] == 0 and document["recap"]["failed"] == 0
    assert document["report"]["ran"] == []
    again = run(onboard_args(net, NAME), net["env"])
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["ran"] == [] and len(report["skipped"]) == 7
    assert all(s["attempts"] == 1 for s in report["steps"] if s["step"] != "stake")

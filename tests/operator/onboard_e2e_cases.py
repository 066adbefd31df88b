"""The cases of operator onboarding end to end, run on two networks by two modules, each of
which gives them its ``net`` (``onboard_stacks``): test_onboard_e2e_ports.py (every service on
free loopback ports) and test_onboard_e2e_localnet.py (``ops-tools localnet up`` on
inventories/local, its fixed ports under /tmp/net-localnet.lock, with the must-hold command line
that relies on the local network's defaults). Two modules, not one parametrized fixture: only
the second waits in the local network's lane (tests/process_lane.py).

On each: ``ops-tools operator onboard`` killed (SIGKILL) right after its attestation step, then
resumed by ``playbooks/operator_worker.yml`` over SSH (this machine as the "remote" GPU server,
through the suite's throwaway sshd), which runs the same command on the host up to the stake,
converges the worker with roles/worker (it joins the network's supervisord, its deployed
manifest naming the program) and lets the onboarding finish on that worker. Then a chat
completion through the gateway answered by the new worker, the settlement, ``operator status``,
and runs that repeat nothing.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from substrateinterface import SubstrateInterface

from ops_tools.operator import gateway_client
from tests.conftest import ROOT
from tests.operator.conftest import ONBOARD_PASSPHRASE, PYTHON, RECAP, VENV_BIN, Sshd
from tests.operator.onboard_stacks import BIN, run

PASSPHRASE = ONBOARD_PASSPHRASE
NAME = "op1"
STEPS = ["gpu", "wallet", "funding", "attestation", "stake", "daemon", "heartbeat"]


def onboard_args(net: dict, name: str) -> list[str]:
    return [str(BIN / "ops-tools"), "operator", "onboard", "--name", name,
            "--passphrase-file", str(net["pass"]), "--no-gpu", "--test-engine", "--yes", "--json",
            "--state-dir", str(net["tmp"] / f"state-{name}"), *net["onboard_extra"]]


def chain(net: dict) -> SubstrateInterface:
    return SubstrateInterface(url=net["rpc_http"], ss58_format=42)


def record(net: dict, address: str) -> dict | None:
    substrate = chain(net)
    try:
        result = substrate.query("OperatorStake", "Operators", [address])
        return result.value if result is not None else None
    finally:
        substrate.close()


def register_calls(net: dict, address: str, first_block: int) -> int:
    substrate = chain(net)
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


def settlement(net: dict, account: str, since: int, timeout: float = 90) -> tuple[int, int]:
    """(block, amount) of the first settlement transfer to ``account`` after block ``since``."""
    substrate = chain(net)
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
                    transfer = (value["module_id"], value["event_id"]) == ("Balances", "Transfer")
                    if transfer and attrs.get("to") == account and \
                            attrs.get("from") == net["settlement_account"]:
                        return number, int(attrs["amount"])
                number += 1
            time.sleep(1)
    finally:
        substrate.close()
    raise AssertionError(f"no settlement transfer to {account} within {timeout} s")


def balance_change(net: dict, account: str, number: int) -> tuple[int, int]:
    """(free + reserved at ``number`` minus at ``number - 1``, fees ``account`` paid in it)."""
    substrate = chain(net)
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


def play(net: dict, sshd: Sshd) -> tuple[subprocess.CompletedProcess, dict]:
    """playbooks/operator_worker.yml for op1 on this machine over SSH; (result, the report the
    onboarding left on the host, the recap's counts)."""
    host = {
        "ansible_host": sshd.host, "ansible_port": sshd.port, "ansible_user": "root",
        "ansible_connection": "paramiko", "ansible_become": False,
        "ansible_ssh_private_key_file": str(sshd.client_key),
        "ansible_python_interpreter": str(PYTHON),
        "ansible_remote_tmp": str(net["tmp"] / "remote-tmp"),
        "operator_name": NAME, "operator_passphrase": PASSPHRASE,
        "operator_gateway_api_key": net["gateway_key"],
        "operator_test_engine": True, "operator_no_gpu": True,
        "operator_rpc_url": net["rpc_ws"], "operator_faucet_url": net["faucet"],
        "operator_attestation_url": net["attestation"], "operator_gateway_url": net["gateway"],
        "operator_venv": str(VENV_BIN.parent),
        "operator_state_dir": str(net["tmp"] / f"state-{NAME}"),
        "operator_keystore_dir": net["env"]["NET_KEYSTORE"],
        "operator_service_manager": "supervisor",
        "operator_supervisor_conf": str(net["supervisor_conf"]),
        # Under the test network's supervisord, as its other programs: the state directory is
        # in pytest's private temporary tree, which the worker's own user could not pass
        # through (its own user is checked on a systemd host: tests/hosts/test_testnet_shape).
        "operator_service_user": "",
        "operator_worker_host": "127.0.0.1", "operator_worker_port": net["worker_port"],
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
    substrate = chain(net)
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
    print(f"\nonboarding ({net['kind']}): first run {first_s:.1f} s to the kill, second run"
          f" (playbook) {time.monotonic() - second_started:.1f} s")
    return {"killed_at": killed_at, "report": document["report"],
            "stderr": err + second.stderr,
            "stdout": out + second.stdout, "first_block": first_block,
            "journal_path": journal_path}


def test_killed_after_attestation_resumes_and_registers_once(onboarded, net):
    killed = [s["name"] for s in onboarded["killed_at"]["steps"] if s["status"] == "done"]
    assert killed[:4] == ["gpu", "wallet", "funding", "attestation"]
    report = onboarded["report"]  # the playbook's last onboarding: after roles/worker
    assert report["skipped"] == STEPS[:5] and report["ran"] == ["daemon", "heartbeat"]
    journal = json.loads(onboarded["journal_path"].read_text())
    assert [s["name"] for s in journal["steps"]] == STEPS
    assert all(s["status"] == "done" for s in journal["steps"])
    assert all(s["attempts"] == 1 for s in journal["steps"][:4])
    assert register_calls(net, report["account"], onboarded["first_block"]) == 1
    on_chain = record(net, report["account"])
    assert on_chain["attestation_hash"] == report["attestation_hash"]
    assert int(on_chain["stake"]) == int(report["stake"]) == int(report["min_stake"])


def test_report_and_secrets(onboarded, net):
    report = onboarded["report"]
    assert report["account"].startswith("5") and len(report["account"]) == 48
    assert len(report["attestation_hash"]) == 66 and report["attestation_mock_root"]
    assert report["worker_url"] == f"http://127.0.0.1:{net['worker_port']}"
    assert "net-test-chat" in report["models"]
    assert report["gateway_view"]["live"] is True
    assert report["gpu"]["no_gpu"] is True
    state = net["tmp"] / f"state-{NAME}"
    for secret in (state / "secrets" / "passphrase", state / "worker" / "secrets" / "passphrase",
                   onboarded["journal_path"]):
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600, secret
    # roles/worker deployed the worker; onboarding installed none of its own.
    assert not (state / "worker.yml").exists()
    deployed = json.loads((state / "worker" / "service.json").read_text())
    assert deployed["program"]["name"] == f"net-worker-{NAME}" == report["service"]["program"]
    assert report["service"]["manager"] == deployed["program"]["manager"] == "supervisor"
    log = state / "worker" / "worker.log"
    keystore = Path(net["env"]["NET_KEYSTORE"])
    assert {stat.S_IMODE(p.stat().st_mode) for p in keystore.iterdir()} == {0o600}
    mnemonic = (state / "secrets" / f"{NAME}.mnemonic").read_text().strip()
    texts = [onboarded["journal_path"].read_text(), onboarded["stderr"], onboarded["stdout"],
             log.read_text()]
    for text in texts:
        assert PASSPHRASE not in text and mnemonic not in text


def test_gateway_routes_to_the_worker_and_settlement_pays(onboarded, net):
    """The rise is read at the settlement's block: a test request earns a few ten thousand
    plancks while every epoch's heartbeat costs the operator a fee of about 10^8, so the balance
    over a longer span falls; the settlement's block shows the rise."""
    account = onboarded["report"]["account"]
    substrate = chain(net)
    since = substrate.get_block_number(substrate.get_chain_head())
    substrate.close()
    answer = gateway_client.request_served_by(net["gateway"], net["gateway_key"],
                                              "net-test-chat", account)
    assert answer.status == 200 and answer.operator == account and answer.text
    block, amount = settlement(net, account, since)  # settled every 10 s (local), 1 s (ports)
    rise, fees = balance_change(net, account, block)
    assert amount > 0 and rise + fees == amount
    if fees == 0:  # no heartbeat of the operator in that block
        assert rise > 0
    status = run([str(BIN / "ops-tools"), "operator", "status", "--name", NAME, "--json",
                  "--passphrase-file", str(net["pass"]),
                  "--rpc-url", net["rpc_ws"], "--gateway-url", net["gateway"],
                  "--indexer-url", net["indexer"] or "http://127.0.0.1:9",
                  "--faucet-url", net["faucet"]], net["env"])
    assert status.returncode == 0, status.stderr
    out = json.loads(status.stdout)
    # A status is one reading. On a loaded machine a worker back from a stall can be out of the
    # gateway's routing, or an epoch behind, for a few seconds (as onboarding's checks allow
    # for): read again until it is live and within the epoch rule.
    deadline = time.monotonic() + 60
    while not (out["worker_live"] and out["last_heartbeat_epoch"] >= out["current_epoch"] - 1):
        assert time.monotonic() < deadline, out
        time.sleep(2)
        again = run(status.args, net["env"])
        assert again.returncode == 0, again.stderr
        out = json.loads(again.stdout)
    assert out["registered"]
    assert out["attestation_hash"] == onboarded["report"]["attestation_hash"]
    if net["indexer"]:  # earnings as the indexer saw the settlements
        deadline = time.monotonic() + 60
        while int((out["earnings_settled"] or {}).get("plancks", 0)) < amount:
            assert time.monotonic() < deadline, out
            time.sleep(2)
            out = json.loads(run(status.args, net["env"]).stdout)
    else:
        assert out["earnings_settled"] is None and "indexer" in out["earnings_error"]


def test_runs_again_repeat_nothing(onboarded, net, sshd):
    replay, document = play(net, sshd)
    assert replay.returncode == 0, replay.stdout[-3000:]
    assert document["recap"]["changed"] == 0 and document["recap"]["failed"] == 0, \
        replay.stdout[-6000:]
    assert document["report"]["ran"] == []
    again = run(onboard_args(net, NAME), net["env"])
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["ran"] == [] and len(report["skipped"]) == 7, \
        (report["ran"], report["redone"], again.stderr[-3000:])
    assert all(s["attempts"] == 1 for s in report["steps"] if s["step"] != "stake")

"""``ops-tools operator onboard`` against every service it talks to, on free loopback ports.

No fixed ports and no lock (unlike test_onboard_e2e.py, the local network's must-hold run): a
development node with 3 s epochs, ``net-faucet``, ``net-attestation``, ``net-gateway`` (settling
every second) and a supervisord of this test, each a real process stopped by its PID. The
onboarding runs all seven steps; its worker joins the test's supervisord."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import pytest
import yaml
from substrateinterface import SubstrateInterface

from tests.conftest import ROOT, free_port
from tests.services.gateway.harness import (
    BIN,
    WORKER_SECRET,
    Proc,
    secret_file,
    start_chain,
    start_gateway,
    transfer,
    wait_for,
)

pytestmark = pytest.mark.slow
TOKEN = 10**12
FAUCET_SEED = "//OnboardFaucet"


def start_service(root: Path, name: str, config: dict) -> tuple[str, Proc]:
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{name}.yml"
    path.write_text(yaml.safe_dump(config))
    proc = Proc([str(BIN / f"net-{name}"), "--config", str(path)], root / f"{name}.log").start()
    url = f"http://127.0.0.1:{config['listen_port']}"
    try:
        wait_for(lambda: httpx.get(url + "/ready", timeout=2).status_code == 200, 60,
                 f"{name} ready")
    except AssertionError:
        proc.stop()
        raise AssertionError(f"{name} did not start:\n{proc.tail()}") from None
    return url, proc


def start_supervisord(root: Path) -> Path:
    (root / "conf.d").mkdir(parents=True)
    conf = root / "supervisord.conf"
    conf.write_text(
        f"[unix_http_server]\nfile={root}/s.sock\n"
        f"[supervisord]\npidfile={root}/s.pid\nlogfile={root}/s.log\n"
        "[rpcinterface:supervisor]\n"
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n"
        f"[supervisorctl]\nserverurl=unix://{root}/s.sock\n"
        f"[include]\nfiles = {root}/conf.d/*.conf\n")
    subprocess.run(["supervisord", "-c", str(conf)], check=True, timeout=30)
    wait_for(lambda: (root / "s.pid").exists(), 30, "supervisord")
    return conf


def stop_supervisord(conf: Path) -> None:
    pidfile = conf.parent / "s.pid"
    pid = int(pidfile.read_text().strip()) if pidfile.exists() else 0
    subprocess.run(["supervisorctl", "-c", str(conf), "shutdown"], capture_output=True,
                   timeout=60, check=False)
    deadline = time.monotonic() + 30
    while pid and pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    if pid and pidfile.exists():
        os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    root = tmp_path_factory.mktemp("onboard-ports")
    procs: list[Proc] = []
    # supervisord's control socket path must stay under 108 bytes.
    short = Path(tempfile.mkdtemp(prefix="nop-"))
    conf: Path | None = None
    chain = start_chain(root / "chain")
    try:
        faucet_key = subprocess.run(
            [str(BIN / "python"), "-c", "from substrateinterface import Keypair;"
             f"print(Keypair.create_from_uri('{FAUCET_SEED}', ss58_format=42).ss58_address)"],
            capture_output=True, text=True, check=True).stdout.strip()
        transfer(chain, "//Alice", faucet_key, 1000 * TOKEN)
        faucet_url, proc = start_service(root / "faucet", "faucet", {
            "listen_port": free_port(), "state_dir": str(root / "faucet" / "state"),
            "rpc_url": chain.ws, "seed_file": str(secret_file(root / "f.seed", FAUCET_SEED)),
            "drip_plancks": 10 * TOKEN, "poll_interval_s": 0.1})
        procs.append(proc)
        attestation_url, proc = start_service(root / "attestation", "attestation", {
            "listen_port": free_port(), "state_dir": str(root / "attestation" / "state"),
            "rpc_url": chain.ws,
            "mock_root_seed_file": str(secret_file(root / "a.seed", "onboard-test-seed-4d2"))})
        procs.append(proc)
        gateway = start_gateway(root / "gateway", chain, f"sqlite:///{root / 'gw.sqlite3'}")
        procs.append(gateway.proc)
        key = subprocess.run(
            [str(BIN / "ops-tools"), "gateway", "keys", "create", "--config", str(gateway.config),
             "--account", "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY", "--json"],
            capture_output=True, text=True, check=True, cwd=ROOT).stdout
        conf = start_supervisord(short)
        yield {"root": root, "chain": chain, "faucet": faucet_url,
               "attestation": attestation_url, "gateway": gateway,
               "key": secret_file(root / "api.key", json.loads(key)["key"]),
               "worker_secret": secret_file(root / "ws", WORKER_SECRET), "supervisor": conf}
    finally:
        if conf is not None:
            stop_supervisord(conf)
        for proc in procs:
            proc.stop()
        chain.stop()


ENV = {k: v for k, v in os.environ.items() if not k.startswith("NET_")}


def onboard(stack: dict, name: str, passfile: Path, *extra: str,
            port: int | None = None) -> subprocess.CompletedProcess:
    root = stack["root"]
    args = {"--rpc-url": stack["chain"].ws, "--faucet-url": stack["faucet"],
            "--attestation-url": stack["attestation"], "--gateway-url": stack["gateway"].url,
            "--gateway-secret-file": str(stack["worker_secret"]),
            "--gateway-key-file": str(stack["key"]), "--service-manager": "supervisor",
            "--supervisor-conf": str(stack["supervisor"]),
            "--worker-port": str(port or free_port()), "--keystore": str(root / "keystore"),
            "--state-dir": str(root / f"state-{name}"), "--timeout": "60"}
    for i in range(0, len(extra), 2):
        args[extra[i]] = extra[i + 1]
    argv = [str(BIN / "ops-tools"), "operator", "onboard", "--name", name, "--passphrase-file",
            str(passfile), "--no-gpu", "--test-engine", "--yes", "--json"]
    for key, value in args.items():
        argv += [key, value]
    return subprocess.run(argv, capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=600,
                          check=False)


def wallet(stack: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "wallet-cli"), *args],
                          env={**ENV, "NET_KEYSTORE": str(stack["root"] / "keystore")},
                          capture_output=True, text=True, timeout=120, check=False)


def on_chain(stack: dict, name: str) -> tuple[int, int, bool]:
    """(free + reserved, next nonce, registered) of the account ``name``."""
    address = json.loads(wallet(stack, "address", name, "--json").stdout)["ss58_address"]
    substrate = SubstrateInterface(url=stack["chain"].http, ss58_format=42)
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


def test_onboarding_runs_every_step_and_the_gateway_routes_to_the_worker(stack):
    root = stack["root"]
    passfile = secret_file(root / "pass", "ports test passphrase")
    env = ENV
    port = free_port()
    started = time.monotonic()
    result = onboard(stack, "opp", passfile, port=port)
    print(f"\nonboarding on free ports: {time.monotonic() - started:.1f} s")
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout)
    assert report["ran"] == ["gpu", "wallet", "funding", "attestation", "stake", "daemon",
                             "heartbeat"]
    assert report["worker_url"] == f"http://127.0.0.1:{port}"
    assert "net-test-chat" in report["models"] and report["gateway_view"]["live"]
    assert report["heartbeat_epoch"] is not None
    status = subprocess.run(
        [str(BIN / "ops-tools"), "operator", "status", "--name", "opp", "--json",
         "--rpc-url", stack["chain"].ws, "--gateway-url", stack["gateway"].url,
         "--keystore", str(root / "keystore"), "--indexer-url", "http://127.0.0.1:9"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120, check=False)
    assert status.returncode == 0, status.stderr
    out = json.loads(status.stdout)
    assert out["registered"] and out["worker_live"]
    assert out["attestation_hash"] == report["attestation_hash"]
    assert out["earnings_settled"] is None and "indexer" in out["earnings_error"]


def test_refusals_stop_with_one_line_and_change_nothing_on_chain(stack, tmp_path):
    passfile = secret_file(tmp_path / "pass", "refusal test passphrase")
    keystore = stack["root"] / "keystore"

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

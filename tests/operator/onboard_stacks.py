"""The networks the onboarding tests run against, as one dict each (``net``):

- ``ports_stack``: every service on free loopback ports, no lock: a development node with 3 s
  epochs, ``net-faucet``, ``net-attestation``, ``net-gateway`` (settling every second, paid by
  //Ferdie) and a supervisord of the test, each a real process stopped by its PID;
- ``localnet_stack``: the local network from nothing (``ops-tools localnet up`` on
  inventories/local, fixed ports, under /tmp/net-localnet.lock), purged afterwards.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import yaml
from substrateinterface import Keypair

from ops_tools.deploy.supervisor_rpc import Supervisor, SupervisorError
from tests.conftest import ROOT, free_port
from tests.localnet import started
from tests.services.gateway.harness import (
    BIN,
    Proc,
    secret_file,
    start_chain,
    start_gateway,
    transfer,
    wait_for,
)

TOKEN = 10**12
FAUCET_SEED = "//OnboardFaucet"
FERDIE = "5CiPPseXPECbkjWCa6MnjNokrgYjMqmKndv2rSnekmSK2DjL"  # both stacks' settlement account
ALICE = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"


def run(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=timeout, check=False)


def _service(root: Path, name: str, config: dict[str, Any]) -> tuple[str, Proc]:
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


def _supervisord(root: Path) -> Path:
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


def _stop_supervisord(conf: Path) -> None:
    pidfile = conf.parent / "s.pid"
    pid = int(pidfile.read_text().strip()) if pidfile.exists() else 0
    with contextlib.suppress(SupervisorError):
        Supervisor(conf).shutdown()
    deadline = time.monotonic() + 30
    while pid and pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    if pid and pidfile.exists():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    shutil.rmtree(conf.parent, ignore_errors=True)


def _base(tmp: Path, passphrase: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NET_")}
    env["NET_KEYSTORE"] = str(tmp / "keystore")
    return {"tmp": tmp, "env": env, "pass": secret_file(tmp / "passphrase", passphrase + "\n"),
            "settlement_account": FERDIE}


# The test gateway forgets a worker after 15 s (its admission tests wait for that), which is the
# worker's announcement interval: a worker onboarded here would drop out of routing for a moment
# every cycle. The product's default (60 s) is four intervals.
ONBOARD_GATEWAY: dict[str, Any] = {"worker_ttl_s": 60.0}


@contextlib.contextmanager
def ports_stack(tmp: Path, passphrase: str,
                gateway_extra: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """``gateway_extra``: settings over the test gateway's (harness.start_gateway)."""
    net = _base(tmp, passphrase)
    procs: list[Proc] = []
    conf: Path | None = None
    chain = start_chain(tmp / "chain")
    try:
        faucet_account = Keypair.create_from_uri(FAUCET_SEED, ss58_format=42).ss58_address
        transfer(chain, "//Alice", faucet_account, 1000 * TOKEN)
        faucet, proc = _service(tmp / "faucet", "faucet", {
            "listen_port": free_port(), "state_dir": str(tmp / "faucet" / "state"),
            "rpc_url": chain.ws, "seed_file": str(secret_file(tmp / "f.seed", FAUCET_SEED)),
            "drip_plancks": 10 * TOKEN, "poll_interval_s": 0.1})
        procs.append(proc)
        attestation, proc = _service(tmp / "attestation", "attestation", {
            "listen_port": free_port(), "state_dir": str(tmp / "attestation" / "state"),
            "rpc_url": chain.ws,
            "mock_root_seed_file": str(secret_file(tmp / "a.seed", "onboard-test-seed-4d2"))})
        procs.append(proc)
        gateway = start_gateway(tmp / "gateway", chain, f"sqlite:///{tmp / 'gw.sqlite3'}",
                                extra={**ONBOARD_GATEWAY, **(gateway_extra or {})})
        procs.append(gateway.proc)
        created = run([str(BIN / "ops-tools"), "gateway", "keys", "create", "--config",
                       str(gateway.config), "--account", ALICE, "--json"], net["env"])
        assert created.returncode == 0, created.stderr
        # supervisord's control socket path must stay under 108 bytes: a short directory.
        conf = _supervisord(Path(tempfile.mkdtemp(prefix="nop-")))
        key = json.loads(created.stdout)["key"]
        net.update(kind="ports", rpc_ws=chain.ws, rpc_http=chain.http, faucet=faucet,
                   attestation=attestation, gateway=gateway.url, indexer=None,
                   gateway_key=key, supervisor_conf=conf,
                   worker_port=free_port(), chain_pid=chain.proc.pid)
        net["onboard_extra"] = [
            "--rpc-url", chain.ws, "--faucet-url", faucet, "--attestation-url", attestation,
            "--gateway-url", gateway.url,
            "--gateway-key-file", str(secret_file(tmp / "api-key", key)),
            "--service-manager", "supervisor", "--supervisor-conf", str(conf),
            "--worker-port", str(net["worker_port"]), "--timeout", "60"]
        yield net
    finally:
        if conf is not None:
            _stop_supervisord(conf)
        for proc in procs:
            proc.stop()
        chain.stop()


@contextlib.contextmanager
def localnet_stack(tmp: Path, passphrase: str) -> Iterator[dict[str, Any]]:
    net = _base(tmp, passphrase)
    local = tmp / "localnet"
    net["env"]["NET_LOCALNET_DIR"] = str(local)
    # From nothing, of its own (tests/localnet.py): onboarding registers on its chain.
    with started(local, env=net["env"]) as localnet:
        print(f"\nlocalnet up: {localnet.up_s:.1f} s")
        net.update(
            kind="localnet", rpc_ws="ws://127.0.0.1:9944", rpc_http="http://127.0.0.1:9944",
            faucet="http://127.0.0.1:8001", attestation="http://127.0.0.1:8002",
            gateway="http://127.0.0.1:8005", indexer="http://127.0.0.1:8004",
            gateway_key=localnet.up["gateway_api_key"],
            supervisor_conf=local / "supervisor" / "supervisord.conf", worker_port=8111,
            # The must-hold command line: everything else is the local network's default.
            onboard_extra=[])
        yield net

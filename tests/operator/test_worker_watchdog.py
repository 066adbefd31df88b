"""The worker's side of the systemd watchdog, and the unit onboarding writes.

``net-worker`` runs as a real process with ``NOTIFY_SOCKET`` pointing at a datagram socket of
this test (what systemd gives a ``Type=notify`` service): it must say READY=1 and keep sending
WATCHDOG=1 every liveness tick, also while the ticks fail (no chain, no gateway here: a gateway
outage must not get the worker restarted, a hung loop must)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ops_tools.operator import units
from ops_tools.operator.context import Options
from tests.conftest import free_port

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

NET_WORKER = Path(sys.executable).with_name("net-worker")


def test_worker_notifies_ready_and_the_watchdog_while_ticks_fail(tmp_path):
    notify = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(notify))
    sock.settimeout(1.0)
    suri = tmp_path / "suri"
    suri.write_text("//Operator2")
    suri.chmod(0o600)
    config = tmp_path / "worker.yml"
    dead = free_port()
    config.write_text(
        f"listen_port: {free_port()}\nengine_url: test\ngateway_url: http://127.0.0.1:{dead}\n"
        f"rpc_url: ws://127.0.0.1:{dead}\n"
        f"dev_suri_file: {suri}\ntick_s: 0.2\n")
    proc = subprocess.Popen([str(NET_WORKER), "--config", str(config)],
                            env={**os.environ, "NOTIFY_SOCKET": str(notify)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    messages: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while messages.count("WATCHDOG=1") < 3 and time.monotonic() < deadline:
            try:
                messages.append(sock.recv(256).decode())
            except TimeoutError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        sock.close()
    assert "READY=1" in messages
    assert messages.count("WATCHDOG=1") >= 3


def test_the_unit_passes_systemd_analyze_verify(tmp_path):
    opts = Options(name="op1", state_dir=tmp_path / "state", keystore_dir=tmp_path / "ks",
                   passphrase_file=None, rpc_url="ws://127.0.0.1:9944",
                   faucet_url="http://127.0.0.1:8001", attestation_url="http://127.0.0.1:8002",
                   gateway_url="http://127.0.0.1:8005", worker_executable=NET_WORKER)
    (tmp_path / "state").mkdir()
    unit = tmp_path / f"{opts.program}.service"
    unit.write_text(units.systemd_unit(opts))
    result = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert str(unit) not in result.stderr, result.stderr  # no warning about our unit

"""How tests/localnet.py picks the logs that explain a failed ``localnet up``: the programs an
error names, by name, by name without the index, or by a loopback port their host's
configuration names; what it says when the network's supervisord was never configured; and the
lock going from the shared network to the next holder in the process without a gap."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from ops_tools.deploy.supervisor_rpc import Supervisor, SupervisorError
from tests.localnet import _tail, diagnose, named_in, program_states

PROGRAMS = ["net-node-authority-0", "net-node-rpc-0", "net-gateway-0", "net-worker-0",
            "net-faucet-0"]


def test_an_error_names_a_program_by_its_name_without_the_index(tmp_path: Path) -> None:
    error = "error: net-worker is not ready after 180 s"
    assert named_in(error, PROGRAMS, tmp_path) == {"net-worker-0"}
    assert named_in("net-node-rpc-0 exited", PROGRAMS, tmp_path) == {"net-node-rpc-0"}
    # A prefix of another name is not that name.
    assert named_in("net-node is slow", PROGRAMS, tmp_path) == set()


def test_a_port_in_the_error_names_the_hosts_configured_with_it(tmp_path: Path) -> None:
    (tmp_path / "gateway-0").mkdir()
    (tmp_path / "gateway-0" / "service.json").write_text('{"listen_port": 8005}')
    (tmp_path / "worker-0" / "etc").mkdir(parents=True)
    (tmp_path / "worker-0" / "etc" / "config.toml").write_text(
        'gateway_url = "http://127.0.0.1:8005"\n')
    (tmp_path / "faucet-0").mkdir()
    (tmp_path / "faucet-0" / "service.json").write_text('{"listen_port": 80051}')
    error = "HTTP 503 ConnectError: Connection refused (http://127.0.0.1:8005/v1/workers)"
    assert named_in(error, PROGRAMS, tmp_path) == {"net-gateway-0", "net-worker-0"}


def test_a_log_tail_is_its_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "net-gateway-0.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    tail = _tail(log).splitlines()
    assert tail[0] == "line 70" and tail[-1] == "line 99" and len(tail) == 30


def test_without_a_supervisord_conf_it_says_so(tmp_path: Path) -> None:
    assert "was never configured" in diagnose(tmp_path, "anything")


@pytest.mark.process  # supervisord and three programs
# Its own group: importing tests/localnet.py would put it in the local network's lane (the longest
# one), which it does not need (no fixed port, no lock).
@pytest.mark.xdist_group("tests/test_localnet_diagnose.py")
def test_a_failed_up_shows_the_state_and_log_of_the_program_the_error_points_at() -> None:
    # The last CI failure: the worker not ready, its gateway on 127.0.0.1:8005 refusing. The
    # gateway's program had died; the dump must show its state and its log, not only the worker's.
    state = Path(tempfile.mkdtemp(prefix="diag-"))  # short: the socket's path has a limit
    sup = state / "supervisor"
    (sup / "logs").mkdir(parents=True)
    (sup / "conf.d").mkdir()
    conf = sup / "supervisord.conf"
    conf.write_text(
        f"[unix_http_server]\nfile={sup}/s.sock\n"
        f"[supervisord]\npidfile={sup}/s.pid\nlogfile={sup}/logs/supervisord.log\n"
        "[rpcinterface:supervisor]\n"
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n"
        f"[supervisorctl]\nserverurl=unix://{sup}/s.sock\n"
        f"[include]\nfiles = {sup}/conf.d/*.conf\n")
    for program, command in (
        ("net-gateway-0", "sh -c 'echo gateway: address already in use >&2; exit 3'"),
        ("net-worker-0", "sh -c 'echo worker: gateway refused; exec sleep 600'"),
        ("net-faucet-0", "sh -c 'echo faucet: serving; exec sleep 600'"),
    ):
        (sup / "conf.d" / f"{program}.conf").write_text(
            f"[program:{program}]\ncommand={command}\nstartsecs=1\nstartretries=0\n"
            f"redirect_stderr=true\nstdout_logfile={sup}/logs/{program}.log\n")
    (state / "gateway-0").mkdir()
    (state / "gateway-0" / "service.json").write_text('{"listen_port": 8005}')
    subprocess.run(["supervisord", "-c", str(conf)], check=True, timeout=30)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            states = program_states(state)
            if states.get("net-gateway-0") == "FATAL" and states.get("net-worker-0") == "RUNNING":
                break
            time.sleep(0.5)
        dump = diagnose(state, "error: net-worker is not ready after 180 s: HTTP 503"
                               " ConnectError: Connection refused (127.0.0.1:8005)")
    finally:
        pid = int((sup / "s.pid").read_text())
        with contextlib.suppress(SupervisorError):
            Supervisor(conf).shutdown()
        deadline = time.monotonic() + 30
        while (sup / "s.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        if (sup / "s.pid").exists():
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(state, ignore_errors=True)
    assert f"supervisord status ({state}):" in dump
    assert re.search(r"net-gateway-0\s+FATAL", dump), dump
    assert "net-gateway-0.log (FATAL)" in dump and "address already in use" in dump, dump
    assert "net-worker-0.log (RUNNING)" in dump and "gateway refused" in dump, dump
    assert "net-faucet-0.log" not in dump  # running, and not named: not dumped

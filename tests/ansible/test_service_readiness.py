"""The service role's readiness wait (plugins/modules/net_service_converge.py) against a real
supervisord: a program that is slow to answer is waited for, as on a busy machine where a
service needs more than a minute to bind its port; one that has stopped for good (supervisord
gave up on it) fails the converge with its state, instead of holding the run for the whole
timeout; so does a node, whose wait is on its JSON-RPC."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ansible.conftest import VENV_BIN, run, tail
from tests.conftest import free_port

pytestmark = pytest.mark.process

# Answers /ready with 200 once it has slept the seconds it is given: a service that needs long
# to import and migrate before it binds.
SLOW_SERVER = """
import http.server, sys, time
time.sleep(float(sys.argv[2]))
class Ready(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/ready" else 404)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Ready).serve_forever()
"""


@pytest.fixture
def supervisor() -> Iterator[Path]:
    """A supervisord of its own that includes conf.d/*.conf, as the supervisor role's does;
    stopped (with its programs) by its PID."""
    # A short root: supervisord's control socket path must fit AF_UNIX's 107 bytes.
    with tempfile.TemporaryDirectory(prefix="rdy-") as name:
        root = Path(name)
        (root / "conf.d").mkdir()
        conf = root / "supervisord.conf"
        conf.write_text(f"""[supervisord]
pidfile={root}/supervisord.pid
logfile={root}/supervisord.log
[unix_http_server]
file={root}/s.sock
[supervisorctl]
serverurl=unix://{root}/s.sock
[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface
[include]
files = {root}/conf.d/*.conf
""")
        supervisord = shutil.which("supervisord") or str(VENV_BIN / "supervisord")
        subprocess.run([supervisord, "-c", str(conf)], check=True, timeout=30)
        pidfile = root / "supervisord.pid"
        deadline = time.monotonic() + 30
        while not (root / "s.sock").exists():
            assert time.monotonic() < deadline, "supervisord did not open its socket"
            time.sleep(0.1)
        try:
            yield conf
        finally:
            pid = int(pidfile.read_text())
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)


def converge(conf: Path, name: str, command: str, ready_url: str, ready_timeout: int,
             rpc: bool = False) -> subprocess.CompletedProcess[str]:
    """The module as the service role (or, with ``rpc``, the node role) calls it under
    supervisor: the program's file, then a start and the readiness wait."""
    root = conf.parent
    program = (f"[program:{name}]\ncommand={command}\nautostart=true\n"
               "autorestart=unexpected\nstartsecs=1\nstartretries=1\n"
               f"stdout_logfile={root}/{name}.log\nredirect_stderr=true\n")
    args = {"name": name, "manager": "supervisor", "supervisor_conf": str(conf),
            "directories": [{"path": str(root / name), "mode": "0750"}],
            "files": [{"path": str(root / "conf.d" / f"{name}.conf"), "content": program}],
            "unit_path": str(root / "conf.d" / f"{name}.conf"),
            "manifest": str(root / name / "service.json"),
            "ready_timeout": ready_timeout,
            **({"ready_rpc": {"url": ready_url, "genesis_hash": "0x" + "00" * 32}} if rpc
               else {"ready_url": ready_url}),
            "log_hint": f"see {root}/{name}.log"}
    return run([str(VENV_BIN / "ansible"), "localhost", "-c", "local", "-o",
                "-e", f"ansible_python_interpreter={VENV_BIN / 'python'}",
                "-m", "net.ops.net_service_converge", "-a", json.dumps(args)])


def test_a_program_slow_to_answer_is_waited_for(supervisor: Path) -> None:
    port = free_port()
    server = supervisor.parent / "slow_server.py"
    server.write_text(SLOW_SERVER)
    command = f"{sys.executable} {server} {port} 4"
    proc = converge(supervisor, "slow", command, f"http://127.0.0.1:{port}/ready", 120)
    assert proc.returncode == 0, tail(proc)
    result = json.loads(proc.stdout.split("=>", 1)[1])
    assert result["restarted"] and result["reason"] == "never started by this role"
    manifest = json.loads((supervisor.parent / "slow" / "service.json").read_text())
    assert manifest["name"] == "slow" and manifest["started_at"]


def test_a_program_that_stopped_for_good_fails_with_its_state(supervisor: Path) -> None:
    # Nothing listens on the port, and the program exits at once: supervisord retries it once
    # and gives up (FATAL). Waiting the 300 s would only delay the same answer.
    port = free_port()
    proc = converge(supervisor, "broken", "sh -c 'exit 2'", f"http://127.0.0.1:{port}/ready",
                    300)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "the program has stopped (FATAL) before it was ready" in out, tail(proc)
    assert "not ready after 300 s" not in out, tail(proc)
    assert f"see {supervisor.parent}/broken.log" in out, tail(proc)
    assert not (supervisor.parent / "broken" / "service.json").exists()


def test_a_node_that_stopped_for_good_fails_with_its_state(supervisor: Path) -> None:
    # The node's wait (its JSON-RPC on the host) gives up on a program that will not come back
    # the same way.
    port = free_port()
    proc = converge(supervisor, "node", "sh -c 'exit 2'", f"http://127.0.0.1:{port}", 300,
                    rpc=True)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "the node's service has stopped (FATAL) before its RPC" in out, tail(proc)
    assert "within 300 s" not in out, tail(proc)
    assert not (supervisor.parent / "node" / "service.json").exists()

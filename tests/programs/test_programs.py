"""The program adapter against a real supervisord: every command a reset or an onboarding sends
is idempotent (a resumed run repeats it), and the status is read from the manager's answer."""

from __future__ import annotations

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

from ops_tools.errors import InputError
from ops_tools.programs import Program

BIN = Path(sys.executable).parent


def sh(command: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60,
                          env=env, check=False)


@pytest.fixture
def supervised() -> Iterator[Program]:
    # A short root: supervisord's control socket path must fit AF_UNIX's 107 bytes.
    with tempfile.TemporaryDirectory(prefix="prg-") as root:
        conf = Path(root) / "supervisord.conf"
        conf.write_text(f"""[supervisord]
pidfile={root}/supervisord.pid
logfile={root}/supervisord.log
nodaemon=false
[unix_http_server]
file={root}/s.sock
[supervisorctl]
serverurl=unix://{root}/s.sock
[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface
[program:sleeper]
command=sleep 600
autostart=false
startsecs=0
[program:broken]
command=sh -c "exit 7"
autostart=false
startsecs=1
startretries=0
""")
        supervisord = shutil.which("supervisord") or "supervisord"
        subprocess.run([supervisord, "-c", str(conf)], check=True, timeout=30)
        pidfile = Path(root) / "supervisord.pid"
        program = Program("supervisor", "sleeper", str(conf))
        deadline = time.monotonic() + 30
        while "sleeper" not in sh(" ".join(program.argv("status"))).stdout:
            assert time.monotonic() < deadline, "supervisord did not answer"
            time.sleep(0.2)
        try:
            yield program
        finally:
            os.kill(int(pidfile.read_text()), signal.SIGTERM)


def running(program: Program) -> bool:
    return program.running(sh(" ".join(program.argv("status", local=True))).stdout)


@pytest.mark.process
def test_supervisor_commands_are_idempotent(supervised):
    program = supervised
    assert not running(program)
    for _ in range(2):  # a started program is left alone; a stopped one stays stopped
        assert sh(program.start()).returncode == 0 and running(program)
    pid = sh(" ".join(program.argv("pid"))).stdout.strip()
    assert sh(program.restart()).returncode == 0 and running(program)
    assert sh(" ".join(program.argv("pid"))).stdout.strip() != pid  # restarted, not kept
    for _ in range(2):
        assert sh(program.stop()).returncode == 0 and not running(program)
    assert sh(program.restart()).returncode == 0 and running(program)  # down: started


@pytest.mark.process
def test_a_start_that_fails_is_a_failure_that_says_why(supervised):
    # start and stop tolerate only "already started" / "not running": any other answer of
    # supervisorctl fails the command, with that answer on stderr.
    broken = Program("supervisor", "broken", supervised.supervisor_conf)
    failed = sh(broken.start())
    assert failed.returncode != 0 and "broken: ERROR" in failed.stderr, failed
    unknown = Program("supervisor", "no-such-program", supervised.supervisor_conf)
    failed = sh(unknown.stop())
    assert failed.returncode != 0 and "no such process" in failed.stderr, failed


def test_manifest_records_are_checked():
    assert Program.of({"manager": "systemd", "name": "net-node"}).argv("stop") == [
        "systemctl", "stop", "net-node.service"]
    with pytest.raises(InputError, match="'upstart'"):
        Program.of({"manager": "upstart", "name": "x"})
    with pytest.raises(InputError, match="supervisor_conf"):
        Program.of({"manager": "supervisor", "name": "x"})
    with pytest.raises(InputError, match="lacks its manager or name"):
        Program.of({"name": "x"})
    assert Program("systemd", "u").running("active\n")
    assert not Program("systemd", "u").running("inactive\n")

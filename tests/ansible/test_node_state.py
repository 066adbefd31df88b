"""The node role decides restarts from state (the service platform's converge module): a run that
installed a new binary and stopped before the restart leaves the next run a node to restart, and
the host manifest then names the binary the running process was started from (issue 19, item 6).
A binary that the running process was already started from (a reset cycle pushes, then starts the
node itself) is recorded without a restart."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ops_tools.deploy.supervisor_rpc import Supervisor
from tests.ansible.conftest import (
    ROOT,
    VENV_BIN,
    deploy_env,
    run,
    shutdown_supervisord,
    tail,
)
from tests.conftest import free_port

PLAYBOOK = ROOT / "tests" / "ansible" / "playbooks" / "apply_node.yml"


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    try:
        yield tmp_path
    finally:
        shutdown_supervisord(tmp_path)


def converge(state: Path, spec: Path, binary: Path, ports: dict[str, int], defer: bool) -> None:
    extra = {"state": str(state), "chainspec": str(spec), "binary": str(binary),
             "defer": defer, **ports}
    proc = run([str(VENV_BIN / "ansible-playbook"), str(PLAYBOOK), "-e", json.dumps(extra)],
               env=deploy_env())
    assert proc.returncode == 0, tail(proc)


def supervisor(state: Path) -> Supervisor:
    return Supervisor(state / "supervisor" / "supervisord.conf")


def node_pid(state: Path) -> int:
    return supervisor(state).process("net-node-0").pid


def started_at(pid: int) -> float:
    ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    btime = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                 if line.startswith("btime "))
    return btime + ticks / os.sysconf("SC_CLK_TCK")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_run_stopped_before_the_restart_is_finished_by_the_next(
    state: Path, rendered_spec: Path
) -> None:
    ports = {"rpc_port": free_port(), "p2p_port": free_port(), "prometheus_port": free_port()}
    first = state / "artifacts" / "devnode-a"
    second = state / "artifacts" / "devnode-b"
    first.parent.mkdir()
    # Two binaries that differ in bytes (so in sha256) and behave the same.
    original = (VENV_BIN / "devnode").read_bytes()
    first.write_bytes(original)
    second.write_bytes(original + b"\n# release b\n")
    for b in (first, second):
        b.chmod(0o755)
    installed = state / "node-0" / "bin" / "net-node"
    manifest = state / "node-0" / "deployed.json"

    converge(state, rendered_spec, first, ports, defer=False)
    before = node_pid(state)
    assert json.loads(manifest.read_text())["binary"]["sha256"] == sha256(first)

    # The interrupted run: binary b is installed, the run ends before any restart.
    converge(state, rendered_spec, second, ports, defer=True)
    assert sha256(installed) == sha256(second)
    assert node_pid(state) == before, "the configure part alone must not restart"
    assert json.loads(manifest.read_text())["binary"]["sha256"] == sha256(first), (
        "the manifest is written only after a successful start"
    )

    # The next run changes no file; the node still runs a, so it restarts it.
    converge(state, rendered_spec, second, ports, defer=False)
    after = node_pid(state)
    assert after != before
    assert started_at(after) >= installed.stat().st_mtime - 0.01
    assert json.loads(manifest.read_text())["binary"]["sha256"] == sha256(second)

    # And a run after that one has nothing left to do.
    converge(state, rendered_spec, second, ports, defer=False)
    assert node_pid(state) == after


def test_files_the_running_node_was_started_from_are_recorded_without_a_restart(
    state: Path, rendered_spec: Path
) -> None:
    ports = {"rpc_port": free_port(), "p2p_port": free_port(), "prometheus_port": free_port()}
    first = state / "artifacts" / "devnode-a"
    second = state / "artifacts" / "devnode-b"
    first.parent.mkdir()
    original = (VENV_BIN / "devnode").read_bytes()
    first.write_bytes(original)
    second.write_bytes(original + b"\n# release b\n")
    for b in (first, second):
        b.chmod(0o755)
    installed = state / "node-0" / "bin" / "net-node"
    manifest = state / "node-0" / "deployed.json"

    converge(state, rendered_spec, first, ports, defer=False)
    assert json.loads(manifest.read_text())["watched"][str(installed)] == sha256(first)

    # What a reset cycle does: push the new binary, then start the node itself.
    tmp = installed.with_name(".net-node.new")
    tmp.write_bytes(second.read_bytes())
    tmp.chmod(0o755)
    os.replace(tmp, installed)
    # Whole seconds apart: the process's start time is known to the clock tick, the boot time
    # it is counted from only to the second.
    time.sleep(1.5)
    supervisor(state).restart("net-node-0")
    started = node_pid(state)

    converge(state, rendered_spec, second, ports, defer=False)
    assert node_pid(state) == started, "the node already ran binary b: no restart"
    recorded = json.loads(manifest.read_text())
    assert recorded["watched"][str(installed)] == sha256(second)
    assert recorded["binary"]["sha256"] == sha256(second)

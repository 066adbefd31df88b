"""The service role decides restarts from state: what should run against the manifest of the
last successful start and the service's own state, never from what changed during one run."""

from __future__ import annotations

import json
import subprocess
import sys
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

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

PLAYBOOK = ROOT / "tests" / "ansible" / "playbooks" / "apply_service.yml"


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    launcher = tmp_path / "bin" / "net-sample"
    launcher.parent.mkdir()
    launcher.write_text(
        f"#!/bin/sh\ncd {ROOT}\nexec {sys.executable} -m tests.services.common.sample.app \"$@\"\n"
    )
    launcher.chmod(0o755)
    try:
        yield tmp_path
    finally:
        shutdown_supervisord(tmp_path)


def converge(state: Path, port: int, slow_s: float, *extra: str) -> dict:
    proc = run([str(VENV_BIN / "ansible-playbook"), str(PLAYBOOK), *extra, "-e",
                json.dumps({"state": str(state), "port": port, "slow_s": slow_s})],
               env=deploy_env())
    assert proc.returncode == 0, tail(proc)
    return json.loads((state / "converge.json").read_text())


def supervisor(state: Path) -> Supervisor:
    return Supervisor(state / "supervisor" / "supervisord.conf")


def pid(state: Path) -> int:
    return supervisor(state).process("net-sample").pid


def test_restart_follows_state_not_the_run(state: Path) -> None:
    port = free_port()
    config = state / "sample-0" / "sample.yml"
    first = converge(state, port, 0.5)
    assert first["restarted"] and first["reason"] == "never started by this role"
    wanted = config.read_bytes()
    converge(state, port, 0.1)  # what runs now: slow_s 0.1
    before = pid(state)
    # A run for slow_s 0.5 that wrote the configuration and died before the restart:
    config.write_bytes(wanted)
    resumed = converge(state, port, 0.5)
    assert resumed["changed_files"] == []  # nothing left to write ...
    assert resumed["restarted"] and resumed["reason"] == "what should run changed"
    assert pid(state) != before  # ... and still restarted
    manifest = json.loads((state / "sample-0" / "service.json").read_text())
    assert manifest["digest"] == resumed["digest"]
    assert oct(config.stat().st_mode & 0o777) == "0o640"
    # Converged: check mode sees nothing to do.
    checked = converge(state, port, 0.5, "--check")
    assert not checked["restarted"] and checked["changed_files"] == []
    # A stopped service: check mode says it would start it, and leaves it stopped.
    supervisor(state).stop("net-sample")
    checked = converge(state, port, 0.5, "--check")
    assert checked["restarted"] and checked["reason"].startswith("not running")
    assert supervisor(state).process("net-sample").statename == "STOPPED"
    fixed = converge(state, port, 0.5)
    assert fixed["restarted"] and fixed["changed_files"] == [] and pid(state) > 0


def test_deferred_restart_is_finished_by_the_cycles_command(state: Path) -> None:
    """A reset cycle's stage-services run writes the files and restarts nothing; its
    restart-services command restarts the service and promotes the manifest, after which the
    role has nothing left to do."""
    from ops_tools.reset.converge import restart_command

    port = free_port()
    manifest = state / "sample-0" / "service.json"
    converge(state, port, 0.1)
    before, recorded = pid(state), manifest.read_text()
    staged = converge(state, port, 0.5, "-e", "service_defer_restart=true")
    pending = staged["pending_start"]
    assert staged["restarted"] and pid(state) == before  # still the process it was
    assert manifest.read_text() == recorded  # the manifest still says what runs
    assert pending["pending"] == f"{manifest}.pending" and not pending["reload"]
    for _ in range(2):  # the second time, as a resumed cycle would: already promoted
        subprocess.run(["sh", "-c", restart_command(pending)], check=True, capture_output=True)
    assert pid(state) != before
    assert json.loads(manifest.read_text())["digest"] == staged["digest"]
    assert not Path(pending["pending"]).exists()
    again = converge(state, port, 0.5)
    assert not again["restarted"] and again["changed_files"] == []


def test_the_manifest_names_the_program_ops_tools_acts_on(state: Path) -> None:
    """The manifest records how the program is started, stopped and asked for its status;
    ops_tools/programs.py acts on it from that record alone. A manifest that does not record it
    (an older role's) is brought up to date without a restart."""
    from ops_tools.programs import Program

    port = free_port()
    manifest = state / "sample-0" / "service.json"
    converge(state, port, 0.1)
    record = json.loads(manifest.read_text())
    program = Program.from_manifest(record)
    assert record["program"]["commands"]["status"][-2:] == ["status", "net-sample"]
    status = subprocess.run(program.status_argv(), capture_output=True, text=True, check=False)
    assert program.running(status.stdout)
    subprocess.run(["sh", "-c", program.stop()], check=True, capture_output=True)
    status = subprocess.run(program.status_argv(), capture_output=True, text=True, check=False)
    assert not program.running(status.stdout)
    subprocess.run(["sh", "-c", program.start()], check=True, capture_output=True)
    before = pid(state)

    older = {k: v for k, v in record.items() if k != "program"}
    manifest.write_text(json.dumps(older))
    checked = converge(state, port, 0.1, "--check")
    assert not checked["restarted"]
    assert "program" not in json.loads(manifest.read_text())  # check mode wrote nothing
    updated = converge(state, port, 0.1)
    assert not updated["restarted"] and updated["changed_files"] == [str(manifest)]
    assert pid(state) == before
    assert json.loads(manifest.read_text()) == record
    assert converge(state, port, 0.1)["changed_files"] == []

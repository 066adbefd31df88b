"""status.yml never fails on nodes that are down: it writes one file per host recording what it
could not see."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.ansible.conftest import VENV_BIN, deploy_env, run, tail
from tests.conftest import free_port
from tests.localnet_lock import localnet_lock

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)


def test_status_of_a_network_that_is_not_running(tmp_path: Path) -> None:
    out_dir = tmp_path / "status"
    port = free_port()  # nothing listens there: every node's RPC is down
    # The services' ports are the local network's own: none may run meanwhile.
    with localnet_lock():
        proc = run(
            [
                str(VENV_BIN / "ansible-playbook"),
                "-i",
                "inventories/local",
                "playbooks/status.yml",
                "-e",
                f"status_out_dir={out_dir}",
                "-e",
                f"node_rpc_port={port}",
            ],
            env=deploy_env(NET_LOCALNET_DIR=str(tmp_path / "state")),
        )
    assert proc.returncode == 0, tail(proc)
    statuses = {p.name: json.loads(p.read_text()) for p in out_dir.iterdir()}
    services = {n for n, s in statuses.items() if s.get("role") == "service"}
    files = sorted(set(statuses) - services)
    assert files == ["authority-0.json", "authority-1.json", "rpc-0.json"]
    for name in services:  # none of the public services runs either
        assert statuses[name]["ready"] is False and statuses[name]["error"]
    for name in files:
        status = json.loads((out_dir / name).read_text())
        assert status["host"] == name.removesuffix(".json")
        assert status["manifest"] is None and status["manifest_error"]
        assert status["service"]["manager"] == "supervisor"
        assert status["service"]["state"] != "RUNNING"
        assert status["rpc"]["ok"] is False
        assert f"127.0.0.1:{port}" in status["rpc"]["error"]
        assert status["genesis_match"] is None
    assert json.loads((out_dir / "rpc-0.json").read_text())["role"] == "rpc"

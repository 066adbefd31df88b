"""The service-state reader of the node and service modules (plugins/module_utils/net_service.py)
against a real supervisord."""

from __future__ import annotations

import contextlib
import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ops_tools.deploy.supervisor_rpc import Supervisor, SupervisorError
from tests.conftest import ROOT

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

spec = importlib.util.spec_from_file_location(
    "net_service", ROOT / "plugins" / "module_utils" / "net_service.py"
)
assert spec is not None and spec.loader is not None
net_service = importlib.util.module_from_spec(spec)
spec.loader.exec_module(net_service)


def conf_in(root: Path) -> Path:
    sock = Path("/tmp") / f"net-test-{root.name[-20:]}.sock"
    conf = root / "supervisord.conf"
    conf.write_text(
        f"[unix_http_server]\nfile={sock}\nchmod=0700\n\n"
        f"[supervisord]\nlogfile={root}/supervisord.log\npidfile={root}/supervisord.pid\n"
        f"childlogdir={root}\nnodaemon=false\n\n"
        "[rpcinterface:supervisor]\n"
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n\n"
        f"[supervisorctl]\nserverurl=unix://{sock}\n\n"
        f"[program:sleeper]\ncommand={sys.executable} -c 'import time; time.sleep(600)'\n"
        "startsecs=0\n"
    )
    return conf


@pytest.fixture
def supervisord(tmp_path: Path):
    conf = conf_in(tmp_path)
    subprocess.run(["supervisord", "-c", str(conf)], check=True)
    try:
        deadline = time.monotonic() + 20
        while net_service.supervisor_state(str(conf), "sleeper") != "RUNNING":
            assert time.monotonic() < deadline, "supervisord did not start its program"
            time.sleep(0.2)
        yield conf
    finally:
        with contextlib.suppress(SupervisorError):
            Supervisor(conf).shutdown()


def test_a_running_program_is_running(supervisord: Path) -> None:
    assert net_service.service_state("supervisor", "sleeper", str(supervisord)) == (
        "RUNNING",
        True,
    )


def test_a_stopped_program_is_not(supervisord: Path) -> None:
    Supervisor(supervisord).stop("sleeper")
    assert net_service.service_state("supervisor", "sleeper", str(supervisord)) == (
        "STOPPED",
        False,
    )


def test_a_program_supervisord_does_not_know_is_absent(supervisord: Path) -> None:
    assert net_service.supervisor_state(str(supervisord), "nobody") == "ABSENT"


def test_no_supervisord_answering_is_unreachable(tmp_path: Path) -> None:
    assert net_service.supervisor_state(str(tmp_path / "missing.conf"), "sleeper") == "UNREACHABLE"
    # A configuration whose socket nobody serves.
    assert net_service.service_state("supervisor", "sleeper", str(conf_in(tmp_path))) == (
        "UNREACHABLE",
        False,
    )

"""Each role's molecule scenario (default driver, against this machine): converge, idempotence
(a second converge changes nothing) and verify, with state in a temporary directory. Every
scenario's cleanup shuts its own supervisord down; this wrapper makes sure of it.

The scenarios run NET_MOLECULE_PARALLEL (default 2) at a time: each has its own state directory,
supervisord and ports. The node and rpc scenarios are the exception: their nodes take the
throwaway chain spec's boot-node address (127.0.0.1:40333) and authority-0's node key (the rpc
scenario's authority does), so they run one after another, in one slot."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from ops_tools.deploy.supervisor_rpc import Supervisor, SupervisorError
from tests.ansible.conftest import (
    ROOT,
    deploy_env,
    molecule_shared,
    molecule_test,
    selected_roles,
    stop_scenarios,
)

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

# Every role's default scenario on this machine; these two have suites of their own
# (tests/operator, tests/reset_scheduler) that run them with their fixtures.
OWN_SUITES = {"genesis_preflight", "reset_scheduler"}
ROLES = sorted(p.parents[2].name for p in ROOT.glob("roles/*/molecule/default/molecule.yml")
               if p.parents[2].name not in OWN_SUITES)
ONE_AFTER_ANOTHER = ("node", "rpc")
PARALLEL = max(1, int(os.environ.get("NET_MOLECULE_PARALLEL", "2")))
# After that chain, the longest scenarios start first, so that the slots end together.
LONGEST_FIRST = ("service",)


@dataclass
class Run:
    returncode: int
    out: str
    ephemeral: Path
    left_behind: list[str]


def _processes_under(path: Path, grace_s: float = 30) -> list[str]:
    """The processes whose command line names ``path`` that are still there after ``grace_s``:
    a process on its way out is not left behind (supervisord removes its pid file, which the
    cleanup waits for, a moment before it exits; CI once saw it in that moment)."""
    deadline = time.monotonic() + grace_s
    while True:
        out = subprocess.run(["pgrep", "-a", "-f", str(path)], capture_output=True, text=True)
        left = [ln for ln in out.stdout.splitlines() if "pgrep" not in ln]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.5)


def _molecule(role: str, workdir: Path, shared: Path) -> Run:
    ephemeral = workdir / "molecule"
    conf = ephemeral / "state" / "supervisor" / "supervisord.conf"
    try:
        returncode, out = molecule_test(
            "default", role, deploy_env(MOLECULE_EPHEMERAL_DIRECTORY=str(ephemeral),
                                         NET_MOLECULE_SHARED=str(shared)),
            # The sequence's leading destroy (the cleanup playbook) clears what an earlier run
            # of the scenario left in its ephemeral directory; this one is new, so it is skipped.
            # The closing cleanup still runs, and the check below holds it to its word.
            timeout=900, log=workdir / "molecule.log", args=("--destroy=never",))
        left = _processes_under(ephemeral)
        return Run(returncode, out, ephemeral, left)
    finally:
        if conf.exists():
            with contextlib.suppress(SupervisorError):  # not running: nothing to stop
                Supervisor(conf).shutdown()


def _in_turn(roles: list[str], workdirs: dict[str, Path], shared: Path,
             runs: dict[str, Future[Run]]) -> None:
    for role in roles:
        future = runs[role]
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(_molecule(role, workdirs[role], shared))
            except BaseException as exc:  # handed to the waiting test
                future.set_exception(exc)


@pytest.fixture(scope="module")
def scenarios(request: pytest.FixtureRequest,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[Run]]]:
    """Starts every selected scenario at once (PARALLEL at a time); each test waits for its own."""
    selected = selected_roles(request, "test_molecule_scenario")
    workdirs = {role: tmp_path_factory.mktemp(f"molecule-{role}") for role in selected}
    # Every scenario's prepare would render the same chain spec.
    shared = molecule_shared(tmp_path_factory.mktemp("molecule-shared"), bundle=False)
    pool = ThreadPoolExecutor(max_workers=PARALLEL, thread_name_prefix="molecule")
    serial = [role for role in ONE_AFTER_ANOTHER if role in selected]
    runs: dict[str, Future[Run]] = {role: Future() for role in serial}
    # The serial chain is the longest slot: it starts first.
    pool.submit(_in_turn, serial, workdirs, shared, runs)
    rest = sorted((role for role in selected if role not in serial),
                  key=lambda role: (*LONGEST_FIRST, role).index(role))
    runs.update({role: pool.submit(_molecule, role, workdirs[role], shared) for role in rest})
    try:
        yield runs
    finally:
        stop_scenarios(pool, runs)


@pytest.mark.slow
# A test waits for its scenario, which may start only after others finished.
@pytest.mark.timeout(900 * len(ROLES) // PARALLEL + 900)
@pytest.mark.parametrize("role", ROLES)
def test_molecule_scenario(role: str, scenarios: dict[str, Future[Run]]) -> None:
    run = scenarios[role].result()
    assert run.returncode == 0, run.out[-8000:]
    steps = ["converge", "idempotence", "verify"]
    scenario = (ROOT / "roles" / role / "molecule" / "default" / "molecule.yml").read_text()
    if "- check" in scenario:
        steps.append("check")
    for step in steps:
        ran = (f"{step}] Executed: Successful" in run.out
               or f"{step}: Executed: Successful" in run.out)
        assert ran, f"molecule did not run {step}:\n{run.out[-3000:]}"
    assert run.left_behind == [], f"the scenario left processes behind: {run.left_behind}"

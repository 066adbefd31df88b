"""Each role's systemd scenario (roles/<role>/molecule/systemd): the production variant on a real
systemd test host (tests/hosts) over SSH with become, as the testnet inventory sets it. Converge,
idempotence (a second converge changes nothing), check mode (a converge in --check reports no
change) and verify; destroy stops the host, which this wrapper makes sure of.

The selected scenarios run NET_MOLECULE_SYSTEMD_PARALLEL (default 2) at a time: most of a
scenario's time is spent waiting (SSH round trips, block production, readiness), and each one
boots its own fleet on a bridge and subnet of its own, so they do not see each other."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.ansible.conftest import (
    ROOT,
    deploy_env,
    molecule_shared,
    molecule_test,
    selected_roles,
    stop_scenarios,
)
from tests.hosts.hosts import missing_tools, stop_fleet

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

ROLES = sorted(p.parents[2].name for p in ROOT.glob("roles/*/molecule/systemd/molecule.yml"))
STEPS = ("create", "prepare", "converge", "idempotence", "check", "verify", "destroy")
PARALLEL = max(1, int(os.environ.get("NET_MOLECULE_SYSTEMD_PARALLEL", "2")))
# The longest scenarios start first, so that the slots end together (the rest by name).
LONGEST_FIRST = ("service", "rpc")


@dataclass
class Run:
    returncode: int
    out: str
    ephemeral: Path
    # Whether the scenario's hosts still ran when molecule ended (seen before this wrapper
    # stops whatever is left).
    left_running: bool


def _molecule(role: str, workdir: Path, shared: Path) -> Run:
    ephemeral = workdir / "molecule"
    env = deploy_env(MOLECULE_EPHEMERAL_DIRECTORY=str(ephemeral), NO_COLOR="1",
                      NET_MOLECULE_SHARED=str(shared))
    try:
        returncode, out = molecule_test("systemd", role, env, timeout=1500,
                                        log=workdir / "molecule.log")
        return Run(returncode, out, ephemeral, (ephemeral / "hosts" / "fleet.json").exists())
    finally:
        stop_fleet(ephemeral / "hosts")


@pytest.fixture(scope="module")
def scenarios(request: pytest.FixtureRequest,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[Run]]]:
    """Starts every selected scenario at once (PARALLEL at a time); each test waits for its own."""
    selected = sorted(selected_roles(request, "test_systemd_scenario"),
                      key=lambda role: (*LONGEST_FIRST, role).index(role))
    # Every scenario's prepare would render the same chain spec and build the same bundle.
    shared = molecule_shared(tmp_path_factory.mktemp("systemd-shared"), bundle=True)
    pool = ThreadPoolExecutor(max_workers=PARALLEL, thread_name_prefix="molecule")
    runs = {role: pool.submit(_molecule, role, tmp_path_factory.mktemp(f"systemd-{role}"), shared)
            for role in selected}
    try:
        yield runs
    finally:
        stop_scenarios(pool, runs)


def _section(out: str, step: str) -> str:
    start = out.find(f"[systemd > {step}] Executing")
    end = out.find(f"[systemd > {step}] Executed", start)
    return out[start:end] if start >= 0 and end >= 0 else ""


@pytest.mark.slow
# A test waits for its scenario, which may start only after others finished (PARALLEL at a time);
# each scenario's own limit is the molecule run's timeout.
@pytest.mark.timeout(1500 * ((len(ROLES) + PARALLEL - 1) // PARALLEL) + 120)
@pytest.mark.skipif(bool(missing_tools()), reason="systemd test hosts need root and "
                    f"{', '.join(missing_tools())} (scripts/bootstrap)")
@pytest.mark.parametrize("role", ROLES)
def test_systemd_scenario(role: str, scenarios: dict[str, Future[Run]]) -> None:
    run = scenarios[role].result()
    out = run.out
    assert run.returncode == 0, out[-8000:]
    for step in STEPS:
        assert f"[systemd > {step}] Executed: Successful" in out, (
            f"molecule did not run {step}:\n{out[-3000:]}")
    check = _section(out, "check")
    recaps = re.findall(r"^\S+\s+: ok=\d+\s+changed=(\d+)", check, re.MULTILINE)
    assert recaps and set(recaps) == {"0"}, f"check mode reported changes:\n{check[-3000:]}"
    assert not run.left_running, "destroy left the hosts running"

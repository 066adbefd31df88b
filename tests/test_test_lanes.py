"""scripts/test-lanes, with a stand-in pytest that reports how it was started: the workers' run
and the idle lane, that lane in a session of its own at nice 19, its output after the workers',
and a failure of either failing the whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process  # runs the script (tests/process_lane.py)

ROOT = Path(__file__).resolve().parents[1]
# Prints its argv, niceness and session, then exits with the status the environment gives for
# its lane (the idle lane is the one with -m idle; without -m it is the whole suite).
FAKE_PYTEST = """#!{python}
import json, os, sys
marks = sys.argv[sys.argv.index("-m") + 1] if "-m" in sys.argv else None
lane = {{"idle": "idle", "not idle": "workers", None: "all"}}[marks]
try:
    group = open("/proc/self/autogroup").read().split()
except OSError:
    group = None
print(json.dumps({{"argv": sys.argv[1:], "nice": os.nice(0), "sid": os.getsid(0),
                  "lane": lane, "group": group}}), flush=True)
sys.exit(int(os.environ["FAKE_RC_IDLE" if lane == "idle" else "FAKE_RC_WORKERS"]))
"""


def lanes(tmp_path: Path, *args: str, workers: int = 0, idle: int = 0
          ) -> tuple[int, list[dict], str]:
    fake = tmp_path / "pytest"
    fake.write_text(FAKE_PYTEST.format(python=sys.executable))
    fake.chmod(0o755)
    env = {**os.environ, "NET_TEST_LANES_PYTEST": str(fake),
           "FAKE_RC_WORKERS": str(workers), "FAKE_RC_IDLE": str(idle)}
    proc = subprocess.run([str(ROOT / "scripts" / "test-lanes"), *args], capture_output=True,
                          text=True, env=env, timeout=60, check=False)
    runs = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc.returncode, runs, proc.stdout


def test_the_idle_lane_runs_apart_at_the_lowest_priority_after_the_workers_output(tmp_path):
    rc, runs, out = lanes(tmp_path, "-n", "5", "--dist", "loadgroup")
    assert rc == 0, out
    workers, idle = runs
    assert workers["lane"] == "workers" and idle["lane"] == "idle"
    assert workers["argv"] == ["-n", "5", "--dist", "loadgroup", "-m", "not idle"]
    assert idle["argv"][:4] == ["-p", "no:xdist", "-m", "idle"]
    assert idle["nice"] == 19 and workers["nice"] == os.nice(0)
    assert idle["sid"] != workers["sid"] == os.getsid(0)
    if idle["group"] is not None:  # the kernel's autogroups: the lane's own, at nice 19
        assert idle["group"][0] != workers["group"][0]
        assert idle["group"][-1] == "19" and workers["group"][-1] == "0"
    assert out.index('"lane": "idle"') > out.index("=== the idle lane")


@pytest.mark.parametrize(("workers", "idle", "expected"), [(1, 0, 1), (0, 1, 1), (2, 1, 2),
                                                           (0, 5, 0)])
def test_either_lane_failing_fails_the_run(tmp_path, workers, idle, expected):
    rc, runs, out = lanes(tmp_path, "-n", "2", workers=workers, idle=idle)
    assert [r["lane"] for r in runs] == ["workers", "idle"], out
    assert rc == expected, out


def test_a_serial_run_is_one_pytest_of_everything(tmp_path):
    rc, runs, out = lanes(tmp_path, "-p", "no:xdist", workers=3)
    assert rc == 3, out
    assert [(r["lane"], r["argv"], r["nice"]) for r in runs] == [
        ("all", ["-p", "no:xdist"], os.nice(0))]

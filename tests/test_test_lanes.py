"""scripts/test-lanes, with a stand-in pytest that reports how it was started: the workers' run
and the idle lane, each in a session of its own, the idle lane at nice 19, its output after the
workers', a failure of either failing the whole, and an interrupt reaching both."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.process  # runs the script (tests/process_lane.py)

ROOT = Path(__file__).resolve().parents[1]
# Prints its argv, niceness, session and autogroup (None: the kernel has no autogroups; [] the
# kernel's root group, where CI's runner is), then exits with the status the environment gives
# for its lane (the idle lane is the one with -m idle; without -m it is the whole suite). With
# FAKE_WAIT_DIR it says it started there and waits for a KeyboardInterrupt, which it notes there.
FAKE_PYTEST = """#!{python}
import json, os, sys, time
marks = sys.argv[sys.argv.index("-m") + 1] if "-m" in sys.argv else None
lane = {{"idle": "idle", "not idle": "workers", None: "all"}}[marks]
try:
    group = open("/proc/self/autogroup").read().split()
except OSError:
    group = None
print(json.dumps({{"argv": sys.argv[1:], "nice": os.nice(0), "sid": os.getsid(0),
                  "lane": lane, "group": group}}), flush=True)
if "FAKE_WAIT_DIR" in os.environ:
    where = os.environ["FAKE_WAIT_DIR"]
    try:  # as pytest: Python's own SIGINT handling, which an inherited SIG_IGN switches off
        with open(os.path.join(where, lane + ".started"), "w") as started:
            started.write(str(os.getpid()))
        time.sleep(60)
    except KeyboardInterrupt:
        open(os.path.join(where, lane + ".interrupted"), "w").close()
        sys.exit(2)
sys.exit(int(os.environ["FAKE_RC_IDLE" if lane == "idle" else "FAKE_RC_WORKERS"]))
"""


def fake_pytest(tmp_path: Path) -> Path:
    fake = tmp_path / "pytest"
    fake.write_text(FAKE_PYTEST.format(python=sys.executable))
    fake.chmod(0o755)
    return fake


def lanes(tmp_path: Path, *args: str, workers: int = 0, idle: int = 0
          ) -> tuple[int, list[dict], str]:
    env = {**os.environ, "NET_TEST_LANES_PYTEST": str(fake_pytest(tmp_path)),
           "FAKE_RC_WORKERS": str(workers), "FAKE_RC_IDLE": str(idle)}
    proc = subprocess.run([str(ROOT / "scripts" / "test-lanes"), *args], capture_output=True,
                          text=True, env=env, timeout=60, check=False)
    runs = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc.returncode, runs, proc.stdout


def test_each_lane_runs_in_its_own_session_the_idle_one_at_the_lowest_priority(tmp_path):
    rc, runs, out = lanes(tmp_path, "-n", "5", "--dist", "loadgroup")
    assert rc == 0, out
    workers, idle = runs
    assert workers["lane"] == "workers" and idle["lane"] == "idle"
    assert workers["argv"] == ["-n", "5", "--dist", "loadgroup", "-m", "not idle"]
    assert idle["argv"][:4] == ["-p", "no:xdist", "-m", "idle"]
    assert idle["nice"] == 19 and workers["nice"] == os.nice(0)
    assert len({idle["sid"], workers["sid"], os.getsid(0)}) == 3
    if idle["group"] is not None:  # the kernel's autogroups: one per lane, the idle one at 19
        assert idle["group"] and workers["group"], runs
        assert idle["group"][0] != workers["group"][0]
        assert idle["group"][-1] == "19" and workers["group"][-1] == "0"
    assert out.index('"lane": "idle"') > out.index("=== the idle lane")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_reaches_both_lanes_and_waits_for_them(tmp_path, signum):
    # Each lane is a session of its own, so a terminal's Ctrl-C no longer reaches it directly.
    env = {**os.environ, "NET_TEST_LANES_PYTEST": str(fake_pytest(tmp_path)),
           "FAKE_WAIT_DIR": str(tmp_path), "FAKE_RC_WORKERS": "0", "FAKE_RC_IDLE": "0"}
    proc = subprocess.Popen([str(ROOT / "scripts" / "test-lanes"), "-n", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 30
        while not all((tmp_path / f"{lane}.started").exists() for lane in ("workers", "idle")):
            assert proc.poll() is None and time.monotonic() < deadline, "the lanes did not start"
            time.sleep(0.05)
        proc.send_signal(signum)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for lane in ("workers", "idle"):  # a stand-in the interrupt did not reach
            started = tmp_path / f"{lane}.started"
            if started.exists() and not (tmp_path / f"{lane}.interrupted").exists():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(started.read_text()), signal.SIGKILL)
    assert proc.returncode == 130, out
    assert (tmp_path / "workers.interrupted").exists() and (tmp_path / "idle.interrupted").exists()


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

"""The systemd backend, rendered for a controller with systemd: units verified offline with
systemd-analyze, enabled through (fake) systemctl, idempotent, pausable, check mode honoured."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.reset_scheduler.conftest import UNIT, Controller, files_under

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")

needs_systemd_analyze = pytest.mark.skipif(
    SYSTEMD_ANALYZE is None,
    reason="systemd-analyze not installed (Debian package systemd); it verifies the units offline",
)


def verify_units(*units: Path) -> subprocess.CompletedProcess[str]:
    assert SYSTEMD_ANALYZE
    return subprocess.run(
        [SYSTEMD_ANALYZE, "verify", *map(str, units)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.slow
@needs_systemd_analyze
def test_units_render_verify_enable_pause_and_switch_backend(controller: Controller) -> None:
    first = controller.apply(
        reset_scheduler_backend="systemd",
        reset_scheduler_randomized_delay_sec=900,
        reset_scheduler_ref="main",
    )
    assert first.rc == 0, first.out
    assert first.recap("changed") > 0

    service = controller.unit_dir / f"{UNIT}.service"
    timer = controller.unit_dir / f"{UNIT}.timer"
    check = verify_units(service, timer)
    # systemd-analyze reports unknown keys and bad values as warnings with rc 0: any output is
    # a finding.
    assert check.returncode == 0 and check.stdout + check.stderr == "", check.stdout + check.stderr

    timer_text = timer.read_text()
    assert "OnCalendar=*-*-* 04:00:00\n" in timer_text
    assert "Persistent=true\n" in timer_text
    assert "RandomizedDelaySec=900\n" in timer_text
    service_text = service.read_text()
    assert "Type=oneshot\n" in service_text
    assert f"ExecStart={controller.wrapper}\n" in service_text
    assert "ProtectHome" not in service_text  # the cycle needs the user's SSH keys

    calls = controller.systemctl_calls()
    assert "daemon-reload" in calls
    assert f"enable {UNIT}.timer" in calls
    assert f"start {UNIT}.timer" in calls
    assert not (controller.root / "etc/cron.d" / UNIT).exists()

    before = len(controller.systemctl_calls())
    second = controller.apply(
        reset_scheduler_backend="systemd",
        reset_scheduler_randomized_delay_sec=900,
        reset_scheduler_ref="main",
    )
    assert second.rc == 0, second.out
    assert second.recap("changed") == 0, second.out
    assert "daemon-reload" not in controller.systemctl_calls()[before:]

    paused = controller.apply(
        reset_scheduler_backend="systemd",
        reset_scheduler_randomized_delay_sec=900,
        reset_scheduler_enabled=False,
    )
    assert paused.rc == 0, paused.out
    tail = controller.systemctl_calls()[before:]
    assert f"disable {UNIT}.timer" in tail
    assert f"stop {UNIT}.timer" in tail

    switched = controller.apply(reset_scheduler_backend="cron")
    assert switched.rc == 0, switched.out
    assert not (controller.unit_dir / f"{UNIT}.timer").exists()
    assert not (controller.unit_dir / f"{UNIT}.service").exists()
    assert (controller.root / "etc/cron.d" / UNIT).read_text().count(str(controller.wrapper)) == 1


@needs_systemd_analyze
def test_the_offline_verification_can_fail(tmp_path: Path) -> None:
    """The empty-output check above has teeth: the same checks flag a broken timer and service."""
    timer = tmp_path / f"{UNIT}.timer"
    timer.write_text("[Timer]\nOnCalendar=every full moon\nPersistent=true\n")
    service = tmp_path / f"{UNIT}.service"
    service.write_text("[Service]\nType=oneshot\nExecStart=/nonexistent/net-reset-cycle\n")
    for unit in (timer, service):
        check = verify_units(unit)
        assert check.returncode != 0 or check.stdout + check.stderr != ""


@pytest.mark.parametrize("backend", ["systemd", "cron"])
def test_check_mode_changes_nothing(controller: Controller, backend: str) -> None:
    before = files_under(controller.root)
    run = controller.apply("--check", "--diff", reset_scheduler_backend=backend)
    assert run.rc == 0, run.out
    assert run.recap("changed") > 0  # it reports what it would do ...
    assert f"reset-cycle --inventory {controller.root}/inventory/hosts.yml" in run.out  # diff
    if backend == "systemd":
        assert "+OnCalendar=*-*-* 04:00:00" in run.out
    assert files_under(controller.root) == before  # ... and does none of it
    mutating = {"enable", "disable", "start", "stop", "daemon-reload"}
    assert not [c for c in controller.systemctl_calls() if c.split(" ")[0] in mutating]

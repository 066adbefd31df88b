"""Which journal leaves a fault to restore (pure: journal files in a temporary directory)."""

from __future__ import annotations

import stat

import pytest

from ops_tools.drills.runner import DrillJournal, detect_timeout


def journal(tmp_path, *steps: tuple[str, str], status: str = "running") -> DrillJournal:
    j = DrillJournal(path=tmp_path / "journal.json", drill_id="d1", scenario="authority-down")
    for name, state in steps:
        rec = j.begin(name)
        if state != "running":
            j.finish(rec, status=state)
    j.status = status
    j.save()
    return DrillJournal.read(j.path)


@pytest.mark.parametrize(("steps", "status", "pending"), [
    # killed before anything was injected: nothing to restore
    ((("healthy", "running"),), "running", False),
    ((("healthy", "done"),), "declined", False),
    # killed while injecting or waiting for the alert: the fault may be there
    ((("healthy", "done"), ("inject", "running")), "running", True),
    ((("healthy", "done"), ("inject", "done"), ("detect", "running")), "running", True),
    # interrupted, the fault removed on the way out, the recovery not checked yet
    ((("healthy", "done"), ("inject", "done"), ("detect", "failed"), ("remove", "done")),
     "failed", True),
    # finished
    ((("healthy", "done"), ("inject", "done"), ("detect", "done"), ("remove", "done"),
      ("recover", "done")), "completed", False),
])
def test_pending(tmp_path, steps, status, pending):
    assert journal(tmp_path, *steps, status=status).pending() is pending


def test_resume_marks_the_killed_step_interrupted_and_the_journal_is_private(tmp_path):
    j = journal(tmp_path, ("healthy", "done"), ("inject", "done"), ("detect", "running"))
    killed = j.resume()
    assert [r.name for r in killed] == ["detect"]
    assert DrillJournal.read(j.path).record("detect").status == "interrupted"
    assert stat.S_IMODE(j.path.stat().st_mode) == 0o600


def test_the_detection_wait_is_generous_beyond_the_bound():
    assert detect_timeout(42) == 162
    assert detect_timeout(120) == 360

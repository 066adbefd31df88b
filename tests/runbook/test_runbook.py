"""The shared step runner: a journal says what was attempted, the check says what is true."""

from __future__ import annotations

import json
import stat
from dataclasses import dataclass
from typing import ClassVar

import pytest

from ops_tools import runbook
from ops_tools.errors import OpsError


@dataclass(kw_only=True)
class History(runbook.Journal):
    HISTORY: ClassVar[bool] = True


def file_step(path, runs: list[str]) -> runbook.Step:
    """A step whose result is a file: its check looks for the file."""

    def run() -> str:
        runs.append("run")
        path.write_text("made")
        return f"wrote {path.name}"

    def check() -> runbook.Check:
        return (True, f"{path.name} is there") if path.exists() else (False, f"{path} is gone")

    return runbook.Step("make", run, check, lambda: {"made": str(path)})


@pytest.mark.parametrize("kind", [runbook.Journal, History])
def test_a_done_step_is_skipped_only_while_its_result_is_there(tmp_path, kind):
    journal, runs, made = kind(path=tmp_path / "j.json"), [], tmp_path / "made"
    assert runbook.settle(journal, file_step(made, runs)).outcome == "ran"
    again = kind.read(journal.path)
    assert runbook.settle(again, file_step(made, runs)).outcome == "kept"
    assert runs == ["run"] and again.facts == {"made": str(made)}
    # The thing the journal claims is removed: the step is done again and says why.
    made.unlink()
    settled = runbook.settle(kind.read(journal.path), file_step(made, runs))
    assert (settled.outcome, settled.why) == ("redone", f"{made} is gone")
    assert runs == ["run", "run"] and made.exists()
    last = kind.read(journal.path).record("make")
    assert last.status == "done" and last.detail.startswith(f"done again ({made} is gone)")
    assert stat.S_IMODE(journal.path.stat().st_mode) == 0o600


def test_history_keeps_every_attempt_and_one_record_counts_them(tmp_path):
    made = tmp_path / "made"
    for kind, want in ((History, [("make", "done", 1), ("make", "checked", 2)]),
                       (runbook.Journal, [("make", "done", 1)])):
        made.unlink(missing_ok=True)
        journal = kind(path=tmp_path / f"{kind.__name__}.json")
        runbook.settle(journal, file_step(made, []))
        runbook.settle(journal, file_step(made, []))
        data = json.loads(journal.path.read_text())
        assert [(s["name"], s["status"], s["attempts"]) for s in data["steps"]] == want


def test_a_failure_is_journaled_and_raised_as_it_came(tmp_path):
    journal = runbook.Journal(path=tmp_path / "j.json")

    def boom() -> str:
        raise OpsError("the host did not answer")

    with pytest.raises(OpsError, match="did not answer"):
        runbook.settle(journal, runbook.Step("s", boom, lambda: (True, "")))
    loaded = runbook.Journal.read(journal.path)
    assert loaded.status == "failed" and loaded.error == "s: the host did not answer"
    assert not loaded.done("s")

    def bug() -> str:
        raise KeyError("x")

    with pytest.raises(KeyError):
        runbook.settle(journal, runbook.Step("t", bug, lambda: (True, "")))
    assert runbook.Journal.read(journal.path).record("t").detail == "KeyError: 'x'"
    runbook.settle(journal, runbook.Step("s", lambda: "fine now", lambda: (True, "")))
    assert (journal.status, journal.error) == ("running", None)  # the failure is past


def test_resume_names_the_step_a_killed_run_was_in(tmp_path):
    journal = runbook.Journal(path=tmp_path / "j.json")
    journal.finish(journal.begin("inject"))
    journal.begin("assert")  # then SIGKILL: nothing records its end
    loaded = runbook.Journal.read(journal.path)
    assert [r.name for r in loaded.resume()] == ["assert"]
    again = runbook.Journal.read(journal.path)
    assert again.record("assert").status == "interrupted" and not again.done("assert")
    assert again.done("inject")


def test_an_unreadable_journal_is_an_error(tmp_path):
    path = tmp_path / "j.json"
    path.write_text("[1, 2]")
    with pytest.raises(ValueError):
        runbook.Journal.read(path)

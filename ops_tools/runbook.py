"""One journaled, resumable step runner: the reset cycle's phases and onboarding's steps.

A journal says what was attempted; the world says what is true. The journal (JSON, written
atomically and 0600 after every change) holds one record per attempt of a step, and the facts
later steps need. A step the journal marks done is skipped only when its ``check`` finds its
result still there (recorded ``checked``, with what was seen); a step whose result is gone is run
again and its record says why. A step still ``running`` in a loaded journal belongs to a process
that was killed in it: ``resume`` marks it ``interrupted`` and returns it, so that the caller
can undo or inspect what it may have half done (a drill restores its injected fault there)
before the step runs again.

A step is a name, a ``run`` (its detail line) and a ``check`` of its result; whatever decides
the order of the steps (a plan, a fixed list) stays with the caller.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self

from ops_tools import atomic
from ops_tools.errors import OpsError

# (holds, what was seen): holds means the step's result is still there and it is skipped.
Check = tuple[bool, str]
DONE = ("done", "checked")


@dataclass
class StepRecord:
    name: str
    # running | done | failed | interrupted (killed while running) | checked (done earlier,
    # its result found still there, so skipped)
    status: str
    started: float
    finished: float | None = None
    attempts: int = 1
    detail: str = ""


@dataclass(kw_only=True)
class Journal:
    """The records and facts of one run; subclasses add the fields that name their run."""

    path: Path
    steps: list[StepRecord] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    status: str = "running"  # running | failed | completed | declined (not confirmed)
    error: str | None = None
    # True: every attempt is its own record (the reset report lists them all); False: one
    # record per step, its attempts counted.
    HISTORY: ClassVar[bool] = False

    @classmethod
    def read(cls, path: Path) -> Self:
        """The journal at ``path``; OSError or ValueError when it is missing or unreadable."""
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        # The reset cycle's journals named their records "phases" before this runner.
        records = data.pop("steps", None) or data.pop("phases", None) or []
        steps = [StepRecord(**s) for s in records]
        known = {f.name for f in fields(cls)} - {"path", "steps"}
        try:
            return cls(path=path, steps=steps, **{k: v for k, v in data.items() if k in known})
        except TypeError as exc:
            raise ValueError(str(exc)) from None

    def save(self) -> None:
        data = asdict(self)
        data.pop("path")
        atomic.write_text(self.path, json.dumps(data, indent=2, sort_keys=True) + "\n", mode=0o600)

    def record(self, step: str) -> StepRecord | None:
        """The last record of ``step``."""
        return next((s for s in reversed(self.steps) if s.name == step), None)

    def done(self, step: str) -> bool:
        rec = self.record(step)
        return rec is not None and rec.status in DONE

    def begin(self, step: str) -> StepRecord:
        rec = self.record(step)
        if rec is None or self.HISTORY:
            rec = StepRecord(step, "running", time.time(),
                             attempts=rec.attempts + 1 if rec else 1)
            self.steps.append(rec)
        else:
            rec.status, rec.started, rec.finished = "running", time.time(), None
            rec.attempts += 1
        self.status, self.error = "running", None
        self.save()
        return rec

    def finish(self, rec: StepRecord, detail: str = "", facts: dict[str, Any] | None = None,
               status: str = "done") -> None:
        self.facts.update(facts or {})
        rec.status, rec.finished, rec.detail = status, time.time(), detail
        self.save()

    def fail(self, rec: StepRecord, error: str) -> None:
        rec.status, rec.finished, rec.detail = "failed", time.time(), error
        self.status, self.error = "failed", f"{rec.name}: {error}"
        self.save()

    def resume(self) -> list[StepRecord]:
        """On resume: the steps still "running" belong to a process killed in them."""
        killed = [r for r in self.steps if r.status == "running"]
        for rec in killed:
            rec.status, rec.detail = "interrupted", "the run stopped in this step"
        self.save()
        return killed


class Display(Protocol):
    def skipped(self, step: str, detail: str) -> None: ...
    def redoing(self, step: str, reason: str) -> None: ...
    def started(self, step: str) -> None: ...
    def finished(self, step: str, detail: str) -> None: ...
    def failed(self, step: str, error: str) -> None: ...


@dataclass(frozen=True)
class Step:
    name: str
    run: Callable[[], str]
    check: Callable[[], Check]
    # Facts the run produced, saved with its record (read after ``run`` returns).
    facts: Callable[[], dict[str, Any]] = dict


@dataclass
class Settled:
    step: str
    outcome: str  # kept (checked, skipped) | ran | redone
    detail: str
    why: str = ""  # redone: why the journal's result was not trusted


def settle(journal: Journal, step: Step, display: Display | None = None) -> Settled:
    """Run ``step`` unless the journal marks it done and its check finds its result there.

    A failure is journaled (``failed``, or ``interrupted: <signal>`` for a process being
    stopped) and raised as it came."""
    why = ""
    if journal.done(step.name):
        holds, seen = step.check()
        if holds:
            if journal.HISTORY:  # one record per step keeps the one that is done
                journal.finish(journal.begin(step.name), seen, status="checked")
            if display:
                display.skipped(step.name, seen)
            return Settled(step.name, "kept", seen)
        why = seen
        if display:
            display.redoing(step.name, why)
    if display:
        display.started(step.name)
    rec = journal.begin(step.name)
    try:
        detail = step.run() or ""
    except OpsError as exc:
        _failed(journal, rec, str(exc), display)
        raise
    except Exception as exc:  # an unexpected failure is still journaled and named
        _failed(journal, rec, f"{type(exc).__name__}: {exc}", display)
        raise
    except BaseException as exc:
        _failed(journal, rec, f"interrupted: {type(exc).__name__}", display)
        raise
    journal.finish(rec, f"done again ({why}): {detail}" if why else detail, step.facts())
    if display:
        display.finished(step.name, detail)
    return Settled(step.name, "redone" if why else "ran", detail, why)


def _failed(journal: Journal, rec: StepRecord, error: str, display: Display | None) -> None:
    journal.fail(rec, error)
    if display:
        display.failed(rec.name, error)

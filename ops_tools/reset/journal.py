"""The journal of a cycle: what ran, what it found, where it stopped. Written after every phase
(atomically), so ``--resume`` continues from the last completed phase."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ops_tools import atomic
from ops_tools.errors import InputError


@dataclass
class PhaseRecord:
    name: str
    # running | done | failed | interrupted (killed while running) | checked (done earlier, its
    # result found still there by a resumed cycle, so skipped)
    status: str
    started: float
    finished: float | None = None
    detail: str = ""


@dataclass
class Journal:
    path: Path
    cycle_id: str
    inventory: str
    repo: str
    ref: str
    status: str = "running"  # running | failed | completed | declined (not confirmed)
    started: float = field(default_factory=time.time)
    facts: dict[str, Any] = field(default_factory=dict)  # revision, artifact, genesis, decision…
    phases: list[PhaseRecord] = field(default_factory=list)
    error: str | None = None

    @classmethod
    def new(cls, path: Path, cycle_id: str, inventory: str, repo: str, ref: str) -> Journal:
        journal = cls(path, cycle_id, inventory, repo, ref)
        journal.save()
        return journal

    @classmethod
    def load(cls, path: Path) -> Journal:
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise InputError(f"no reset cycle to resume: {path} does not exist") from None
        except json.JSONDecodeError as exc:
            raise InputError(
                f"journal {path} is not valid JSON ({exc}); inspect it by hand"
            ) from None
        phases = [PhaseRecord(**p) for p in data.pop("phases", [])]
        return cls(path=path, phases=phases, **{k: v for k, v in data.items() if k != "path"})

    def save(self) -> None:
        data = asdict(self)
        data.pop("path")
        atomic.write_text(self.path, json.dumps(data, indent=2, sort_keys=True) + "\n", mode=0o600)

    def done(self, phase: str) -> bool:
        return any(p.name == phase and p.status == "done" for p in self.phases)

    def begin(self, phase: str) -> PhaseRecord:
        record = PhaseRecord(phase, "running", time.time())
        self.phases.append(record)
        self.save()
        return record

    def finish(self, record: PhaseRecord, detail: str = "", status: str = "done") -> None:
        record.status, record.finished, record.detail = status, time.time(), detail
        self.save()

    def mark_interrupted(self) -> None:
        """On resume: a phase still "running" belongs to a cycle that was killed in it."""
        for record in self.phases:
            if record.status == "running":
                record.status, record.detail = "interrupted", "the cycle stopped in this phase"
        self.save()

    def fail(self, record: PhaseRecord, error: str) -> None:
        record.status, record.finished, record.detail = "failed", time.time(), error
        self.status, self.error = "failed", f"{record.name}: {error}"
        self.save()

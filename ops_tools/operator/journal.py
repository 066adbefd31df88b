"""The onboarding journal: one record per step, written after every change (atomically, 0600).

The idea of the reset cycle's journal (``ops_tools.reset.journal``): a step that is ``done`` is
never run again; a step that was ``running`` when the process died, or ``failed``, runs again
and keeps its one record (``attempts`` counts the runs). Facts that later steps need (the
account, the attestation hash, ...) are kept beside the steps. Nothing secret is written here:
no passphrase, no key, no API key.

The journal belongs to one network: a journal of another genesis (the network was reset) is
moved aside as ``journal.<genesis>.json`` and onboarding starts afresh on the new one, except for
what belongs to the machine, not the network: the GPU detection and the account (whose check
then refuses to go on without it rather than create another).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ops_tools import atomic
from ops_tools.errors import OpsError

VERSION = 1
# Steps and facts of the machine, kept across a network reset (their checks still run).
MACHINE_STEPS = ("gpu", "wallet")
MACHINE_FACTS = ("gpu", "account", "eth_address", "keystore", "mnemonic_backup")


@dataclass
class StepRecord:
    name: str
    status: str  # running | done | failed
    started: float
    finished: float | None = None
    attempts: int = 1
    detail: str = ""


@dataclass
class Journal:
    path: Path
    name: str
    genesis_hash: str | None = None
    steps: list[StepRecord] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    version: int = VERSION

    @classmethod
    def open(cls, path: Path, name: str) -> Journal:
        """The journal at ``path``, or a new one (written at once) when there is none."""
        if not path.exists():
            journal = cls(path, name)
            journal.save()
            return journal
        try:
            data = json.loads(path.read_text())
            steps = [StepRecord(**s) for s in data.pop("steps", [])]
            data.pop("path", None)
            journal = cls(path=path, steps=steps, **data)
        except (OSError, ValueError, TypeError) as exc:
            raise OpsError(f"journal {path}: unreadable ({exc}); move it aside to start the"
                           " onboarding afresh") from None
        if journal.name != name:
            raise OpsError(f"journal {path} is operator {journal.name!r}'s, not {name!r}; give"
                           " each operator its own --state-dir")
        return journal

    def bind_network(self, genesis_hash: str) -> bool:
        """Tie the journal to ``genesis_hash``; False (and a fresh journal) after a reset."""
        if self.genesis_hash in (None, genesis_hash):
            if self.genesis_hash is None:
                self.genesis_hash = genesis_hash
                self.save()
            return True
        old = self.path.with_name(f"journal.{self.genesis_hash}.json")
        self.path.rename(old)
        self.genesis_hash = genesis_hash
        self.steps = [s for s in self.steps if s.name in MACHINE_STEPS and s.status == "done"]
        self.facts = {k: v for k, v in self.facts.items() if k in MACHINE_FACTS}
        self.save()
        return False

    def save(self) -> None:
        data = asdict(self)
        data.pop("path")
        atomic.write_text(self.path, json.dumps(data, indent=2, sort_keys=True) + "\n", mode=0o600)

    def record(self, step: str) -> StepRecord | None:
        return next((s for s in self.steps if s.name == step), None)

    def done(self, step: str) -> bool:
        rec = self.record(step)
        return rec is not None and rec.status == "done"

    def begin(self, step: str) -> StepRecord:
        rec = self.record(step)
        if rec is None:
            rec = StepRecord(step, "running", time.time())
            self.steps.append(rec)
        else:
            rec.status, rec.started, rec.finished = "running", time.time(), None
            rec.attempts += 1
        self.save()
        return rec

    def finish(self, rec: StepRecord, detail: str, facts: dict[str, Any]) -> None:
        self.facts.update(facts)
        rec.status, rec.finished, rec.detail = "done", time.time(), detail
        self.save()

    def fail(self, rec: StepRecord, error: str) -> None:
        rec.status, rec.finished, rec.detail = "failed", time.time(), error
        self.save()

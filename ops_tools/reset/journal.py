"""The journal of a cycle: the run's identity over the shared step journal (``ops_tools.runbook``),
one record per attempt of a phase, so that ``--resume`` continues from the last completed phase
and the report lists every attempt."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from ops_tools import runbook
from ops_tools.errors import InputError


@dataclass(kw_only=True)
class Journal(runbook.Journal):
    cycle_id: str
    inventory: str
    repo: str
    ref: str
    started: float = field(default_factory=time.time)
    HISTORY: ClassVar[bool] = True

    @classmethod
    def new(cls, path: Path, cycle_id: str, inventory: str, repo: str, ref: str) -> Journal:
        journal = cls(path=path, cycle_id=cycle_id, inventory=inventory, repo=repo, ref=ref)
        journal.save()
        return journal

    @classmethod
    def load(cls, path: Path) -> Journal:
        try:
            return cls.read(path)
        except FileNotFoundError:
            raise InputError(f"no reset cycle to resume: {path} does not exist") from None
        except (OSError, ValueError) as exc:
            raise InputError(
                f"journal {path} is not readable ({exc}); inspect it by hand") from None

"""The onboarding steps, in the interface document's order. Each module has ``NAME``, ``TITLE``
and ``run(ctx) -> Outcome``; ``runner`` journals them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Outcome:
    detail: str
    facts: dict[str, Any] = field(default_factory=dict)

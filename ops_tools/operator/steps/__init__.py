"""The onboarding steps, in the interface document's order. Each module has ``NAME``, ``TITLE``,
``run(ctx) -> Outcome`` and ``check(ctx) -> str | None``; ``runner`` journals them.

``check`` looks, cheaply, whether what a done step produced is still true: None when it is, else
why it is gone (the step is then run again). It raises when it cannot look (a service that does
not answer) or when running the step again would be wrong (a journaled account missing from the
keystore): the journal says what was attempted, the world says what is true.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ops_tools.operator.context import Context


@dataclass
class Outcome:
    detail: str
    facts: dict[str, Any] = field(default_factory=dict)


def gone(ctx: Context, reason: str) -> str:
    """A check's reason, naming a re-created network when the preflight saw one."""
    return f"{reason}: the network was re-created" if ctx.recreated else reason

"""The onboarding steps, in the interface document's order. Each module has ``NAME``, ``TITLE``,
``run(ctx) -> Outcome`` and ``check(ctx) -> str | None``; ``runner`` journals them.

``check`` looks, cheaply, whether what a done step produced is still true: None when it is, else
why it is gone (the step is then run again). It raises when it cannot look (a service that does
not answer) or when running the step again would be wrong (a journaled account missing from the
keystore): the journal says what was attempted, the world says what is true.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ops_tools.operator.context import Context

# How long a check of what a running worker keeps true (live at the gateway, heartbeats within
# the epoch rule) reads again before it calls the result gone. On a loaded host the worker can
# miss a health check or an epoch and catch up by itself; redoing the step on one reading would
# restart a worker that only stalled, or race its heartbeats.
LIVENESS_PATIENCE_S = 30.0


@dataclass
class Outcome:
    detail: str
    facts: dict[str, Any] = field(default_factory=dict)


def gone(ctx: Context, reason: str) -> str:
    """A check's reason, naming a re-created network when the preflight saw one."""
    return f"{reason}: the network was re-created" if ctx.recreated else reason


def patiently(ctx: Context, look: Callable[[], str | None], every_s: float = 2.0) -> str | None:
    """``look`` again every ``every_s`` until it finds the result (None) or the patience (at most
    the run's ``--timeout``) is spent; then the last reason."""
    deadline = time.monotonic() + min(ctx.options.timeout_s, LIVENESS_PATIENCE_S)
    while True:
        why = look()
        if why is None or time.monotonic() >= deadline:
            return why
        time.sleep(every_s)

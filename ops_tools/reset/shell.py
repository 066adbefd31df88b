"""Shell lines that combine a host's commands into one, so that a batch is one round trip."""

from __future__ import annotations


def in_order(commands: list[str]) -> str:
    """One shell command that runs ``commands`` one after the other and stops at a failure."""
    return " && ".join(f"{{ {c}\n}}" for c in commands)


def all_at_once(commands: list[str]) -> str:
    """One shell command that runs ``commands`` as background jobs and fails if any fails.

    Its status is its last test's, never an ``exit``: it may be a step of ``in_order``, whose
    next steps must still run."""
    jobs = "".join(f'( {c} ) & pids="$pids $!"; ' for c in commands)
    return f'pids=""; {jobs}rc=0; for p in $pids; do wait "$p" || rc=1; done; [ "$rc" = 0 ]'

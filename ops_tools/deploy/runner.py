"""Running a playbook through ansible-runner, with progress, and a summary of what it did."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ansible_runner

from ops_tools.deploy.paths import ANSIBLE_CFG
from ops_tools.errors import InputError, OpsError


@dataclass
class PlaybookResult:
    ok: bool
    rc: int
    changed: int = 0
    failures: list[str] = field(default_factory=list)
    # Every host the run reached (its recap), so callers need not read the inventory again.
    hosts: list[str] = field(default_factory=list)
    # What each host's deferred restarts need (net_service_converge's pending_start), in task
    # order: one inventory host may deploy several services (the indexer: processor and API).
    pending_starts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


class PlaybookFailed(OpsError):
    pass


STRATEGIES = ("mitogen", "ansible")
DEFAULT_STRATEGY = "mitogen"


def strategy_env(strategy: str | None) -> dict[str, str]:
    """Environment that selects ``strategy`` (default: ``$NET_ANSIBLE_STRATEGY``, else mitogen).

    ``mitogen`` runs each host's modules in one long-lived interpreter instead of a fresh Python
    per task, which halves a converge here; ``ansible`` is Ansible's own (ansible.cfg's free
    strategy), for a host where mitogen misbehaves.
    """
    name = strategy or os.environ.get("NET_ANSIBLE_STRATEGY") or DEFAULT_STRATEGY
    if name not in STRATEGIES:
        raise InputError(
            f"Ansible strategy {name!r} is not one of {', '.join(STRATEGIES)}"
            " (--strategy or NET_ANSIBLE_STRATEGY)"
        )
    if name == "ansible":
        return {}
    try:
        import ansible_mitogen
    except ImportError:
        raise OpsError(
            "the mitogen strategy needs the mitogen package (scripts/bootstrap installs it);"
            " or choose --strategy ansible"
        ) from None
    plugins = Path(ansible_mitogen.__file__).parent / "plugins" / "strategy"
    return {
        "ANSIBLE_STRATEGY_PLUGINS": str(plugins),
        "ANSIBLE_STRATEGY": "mitogen_free",
        # ansible-core flags every strategy outside ansible.builtin as deprecated, on every run.
        "ANSIBLE_DEPRECATION_WARNINGS": "false",
    }


def _failure_text(event: dict[str, Any]) -> str:
    data = event.get("event_data", {})
    res = data.get("res", {}) or {}
    msg = res.get("msg") or res.get("stderr") or res.get("reason") or "failed"
    if isinstance(msg, list):
        msg = "; ".join(str(m) for m in msg)
    return f"{data.get('host', '?')}: {data.get('task', '?')}: {str(msg).strip()}"


def failure_detail(failures: list[str], rc: int, *, shown: int = 5) -> str:
    """Every host's failure, not only the first: hosts converge in parallel (strategy free), and
    the first to time out may only be waiting on another that failed for the real reason."""
    if not failures:
        return f"ansible-playbook exit status {rc}"
    more = len(failures) - shown
    return "\n".join([*failures[:shown], *([f"(and {more} more)"] if more > 0 else [])])


def run_playbook(
    playbook: Path,
    inventory: Path,
    extravars: dict[str, Any] | None = None,
    *,
    on_task: Callable[[str], None] | None = None,
    strategy: str | None = None,
    cancel: threading.Event | None = None,
    limit: str | None = None,
) -> PlaybookResult:
    """Run ``playbook`` on ``inventory``; ``on_task`` is told each task's name as it starts.
    Setting ``cancel`` stops the run (for a run in a thread whose caller gave up); ``limit`` is
    ansible-playbook's ``--limit`` pattern."""
    selected = strategy_env(strategy)
    result = PlaybookResult(ok=False, rc=-1)

    def handler(event: dict[str, Any]) -> bool:
        kind = event.get("event")
        data = event.get("event_data", {})
        if kind == "playbook_on_task_start" and on_task:
            on_task(str(data.get("task", "")))
        elif kind in ("runner_on_failed", "runner_on_unreachable") and not data.get(
            "ignore_errors"
        ):
            result.failures.append(_failure_text(event))
        elif kind == "runner_on_ok" and isinstance((data.get("res") or {}).get("pending_start"),
                                                   dict):
            result.pending_starts.setdefault(str(data.get("host")), []).append(
                data["res"]["pending_start"])
        return True

    private = Path(tempfile.mkdtemp(prefix="ops-tools-runner-"))
    try:
        envvars = {"ANSIBLE_CONFIG": str(ANSIBLE_CFG)} if ANSIBLE_CFG.exists() else {}
        envvars.update(selected)
        envvars["ANSIBLE_FORCE_COLOR"] = "0"
        run = ansible_runner.run(
            private_data_dir=str(private),
            playbook=str(playbook.resolve()),
            inventory=str(inventory.resolve()),
            extravars=extravars or {},
            # ansible-runner starts ansible-playbook by name: the one beside this interpreter.
            envvars={
                **envvars,
                "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
            },
            quiet=True,
            event_handler=handler,
            cancel_callback=cancel.is_set if cancel is not None else None,
            limit=limit,
            settings={"suppress_ansible_output": True},
        )
        # Read everything from the run before its private directory goes away.
        result.rc = run.rc
        result.ok = run.status == "successful" and run.rc == 0
        stats = run.stats or {}
        result.changed = sum((stats.get("changed") or {}).values())
        result.hosts = sorted({host for counts in stats.values() for host in counts or {}})
    finally:
        shutil.rmtree(private, ignore_errors=True)
    if not result.ok:
        raise PlaybookFailed(f"{playbook.name} failed: {failure_detail(result.failures, run.rc)}")
    return result

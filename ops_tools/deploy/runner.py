"""Running a playbook (``ansible-playbook`` with the collection's ``net.ops.events`` callback),
with progress, and a summary of what it did."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ops_tools.atomic import write_text
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
OTHER_LINES = 20  # lines of standard output that are not events, kept for a failure's message
ERROR_LINES = 15
DEFAULT_STRATEGY = "mitogen"
# ansible-core 2.19 imports DSA (its SSH agent client) as it starts, and cryptography 51
# deprecates DSA on standard error: a line before every run's own words that is neither the
# playbook's error nor anything an operator can change.
QUIET_WARNINGS = "ignore:DSA is deprecated"


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


def failure_detail(failures: list[str], rc: int, *, shown: int = 5) -> str:
    """Every host's failure, not only the first: hosts converge in parallel (strategy free), and
    the first to time out may only be waiting on another that failed for the real reason."""
    if not failures:
        return f"ansible-playbook exit status {rc}"
    more = len(failures) - shown
    return "\n".join([*failures[:shown], *([f"(and {more} more)"] if more > 0 else [])])


def _read_events(lines: Any, result: PlaybookResult, on_task: Callable[[str], None] | None,
                 other: list[str]) -> None:
    """The events of ``plugins/callback/events.py``, one JSON object per line, into ``result``;
    any other line (a plugin that prints) is kept in ``other``, the last few."""
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        if not isinstance(event, dict):
            other.append(line.rstrip("\n")[:500])
            del other[:-OTHER_LINES]
            continue
        kind = event.get("event")
        if kind == "task" and on_task:
            on_task(str(event.get("name", "")))
        elif kind == "failed":
            result.failures.append(f"{event.get('host', '?')}: {event.get('task', '?')}:"
                                   f" {event.get('msg', 'failed')}")
        elif kind == "pending_start" and isinstance(event.get("pending_start"), dict):
            result.pending_starts.setdefault(str(event.get("host")), []).append(
                event["pending_start"])
        elif kind == "stats":
            result.changed = sum(int(n) for n in (event.get("changed") or {}).values())
            result.hosts = sorted(str(h) for h in event.get("hosts") or ())


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
    env = {**os.environ, **strategy_env(strategy),
           # The collection's callback (plugins/callback/events.py): the events, nothing else.
           "ANSIBLE_STDOUT_CALLBACK": "net.ops.events",
           "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_NOCOLOR": "1",
           # ansible-playbook beside this interpreter, and the interpreter it names.
           "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
           # The last filter wins: the caller's own filters stay, this one above them.
           "PYTHONWARNINGS": ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"),
                                                    QUIET_WARNINGS]))}
    if ANSIBLE_CFG.exists():
        env["ANSIBLE_CONFIG"] = str(ANSIBLE_CFG)
    result = PlaybookResult(ok=False, rc=-1)
    private = Path(tempfile.mkdtemp(prefix="ops-tools-playbook-"))
    other: list[str] = []
    try:
        # The variables in a 0600 file, not on the command line (ps shows it).
        extra = private / "extravars.json"
        write_text(extra, json.dumps(extravars or {}), mode=0o600)
        argv = [str(Path(sys.executable).with_name("ansible-playbook")), "-i",
                str(inventory.resolve()), "-e", f"@{extra}", *(["--limit", limit] if limit else []),
                str(playbook.resolve())]
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        errors: list[str] = []
        stderr = threading.Thread(target=lambda: errors.extend(proc.stderr or ()), daemon=True)
        stderr.start()
        stop = threading.Event()

        def watch() -> None:
            while cancel is not None and not stop.wait(0.5):
                if cancel.is_set():
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGTERM)
                    return

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            _read_events(proc.stdout, result, on_task, other)
            result.rc = proc.wait()
        finally:
            stop.set()
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            stderr.join(timeout=10)
        result.ok = result.rc == 0
    finally:
        shutil.rmtree(private, ignore_errors=True)
    if not result.ok:
        detail = failure_detail(result.failures, result.rc)
        if not result.failures:
            # No task failed: ansible-playbook itself did (a syntax error, an inventory it
            # could not parse); its own words are on stderr.
            said = "\n".join(line.rstrip() for line in (errors + other)[-ERROR_LINES:])
            detail = f"{detail}: {said.strip()}" if said.strip() else detail
        raise PlaybookFailed(f"{playbook.name} failed: {detail}")
    return result

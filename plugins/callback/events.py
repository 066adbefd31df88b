"""The stdout callback that ops-tools runs its playbooks with: one JSON object per line, only what
ops-tools reads (each task's start, failures, the converge module's deferred restarts, the recap).
It replaces ansible-runner's event callback, which serialised every event of every host and task
to a file for ops-tools to read back (docs/benchmarks.md)."""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: events
type: stdout
short_description: One JSON object per line for ops-tools (ops_tools/deploy/runner.py)
author: NET ops suite
description:
  - >-
    Writes, one JSON object per line on standard output, each task's start
    (C({"event": "task", "name": ...})), every failed or unreachable host
    (C({"event": "failed", "host": ..., "task": ..., "msg": ...})), the deferred restart that
    net.ops.net_service_converge returns
    (C({"event": "pending_start", "host": ..., "pending_start": {...}})), and the recap
    (C({"event": "stats", "changed": {host: n}, "hosts": [...]})). Nothing else is printed.
"""

MSG_LIMIT = 4000  # a failure's message as ops-tools shows it; a module's whole output is not
LABEL_LIMIT = 200  # a loop item's label in that message


def _message(res: dict[str, Any], kind: str) -> str:
    msg = res.get("msg") or res.get("stderr") or res.get("reason") or res.get("censored") or kind
    return "; ".join(str(m) for m in msg) if isinstance(msg, list) else str(msg)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "net.ops.events"

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def _emit(self, event: dict[str, Any]) -> None:
        line = json.dumps(event, default=str)
        with self._lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def v2_playbook_on_task_start(self, task: Any, is_conditional: bool) -> None:
        self._emit({"event": "task", "name": task.get_name()})

    def v2_playbook_on_handler_task_start(self, task: Any) -> None:
        self._emit({"event": "task", "name": task.get_name()})

    def _failure(self, result: Any, kind: str) -> None:
        res = result._result or {}
        msg = _message(res, kind)
        # A loop's own message only sums its items up ("All items completed", "One or more
        # items failed"): the first item that failed or was unreachable says why.
        for item in res.get("results") or ():
            if isinstance(item, dict) and (item.get("failed") or item.get("unreachable")):
                # The loop's label (loop_control.label, which roles set to keep a secret item
                # out of the output), as Ansible's own output shows it.
                label = repr(item.get("_ansible_item_label", item.get("item")))[:LABEL_LIMIT]
                msg = f"item {label}: {_message(item, kind)}"
                break
        if kind == "unreachable":
            msg = f"unreachable: {msg}"
        self._emit({"event": "failed", "kind": kind, "host": result._host.get_name(),
                    "task": result._task.get_name(), "msg": msg.strip()[:MSG_LIMIT]})

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        if not ignore_errors:
            self._failure(result, "failed")

    def v2_runner_on_unreachable(self, result: Any) -> None:
        self._failure(result, "unreachable")

    def v2_runner_on_ok(self, result: Any) -> None:
        pending = (result._result or {}).get("pending_start")
        if isinstance(pending, dict):
            self._emit({"event": "pending_start", "host": result._host.get_name(),
                        "pending_start": pending})

    def v2_playbook_on_stats(self, stats: Any) -> None:
        hosts = sorted(stats.processed)
        self._emit({"event": "stats", "hosts": hosts,
                    "changed": {h: int(stats.summarize(h)["changed"]) for h in hosts}})

#!/usr/bin/python
"""Read whether a node's service runs (supervisord over its socket, or systemd)."""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.net.ops.plugins.module_utils.net_service import (
    ServiceStateError,
    changed_since,
    main_pid,
    process_started_at,
    service_state,
)

DOCUMENTATION = r"""
module: net_service_state
short_description: Whether a node's service is running
author: NET ops suite
description:
  - Asks the project's supervisord over its unix socket (XML-RPC getProcessInfo), or
    C(systemctl is-active). Never changes anything; a program supervisord does not know yet is
    C(ABSENT), and no supervisord answering is C(UNREACHABLE); neither is an error.
options:
  manager: {description: service manager, type: str, choices: [supervisor, systemd], required: true}
  name: {description: program (supervisor) or unit name without .service, type: str, required: true}
  supervisor_conf:
    description: supervisord.conf of the project's supervisord
    type: path
    default: ""
  pending:
    description: A change that needs a restart is pending (the handlers marked it).
    type: bool
    default: false
  restart_files:
    description: >-
      Files the running process read at its start (binary, chain spec, node key): one written
      after the process started means it must restart, also when the run that wrote it ended
      before restarting it.
    type: list
    elements: path
    default: []
  definition_files:
    description: >-
      The program or unit file: one written after the process started means the service
      manager must re-read it (supervisorctl update, systemctl daemon-reload) and restart.
    type: list
    elements: path
    default: []
"""

RETURN = r"""
state:
  description: >-
    supervisord's state name (RUNNING, STARTING, BACKOFF, FATAL, ABSENT, UNREACHABLE, ...) or
    systemd's active state
  type: str
  returned: success
running: {description: the service runs (RUNNING, or active), type: bool, returned: success}
up:
  description: running, or on its way (STARTING, activating); starting it again would fail
  type: bool
  returned: success
start_needed: {description: pending, stale, or not up, type: bool, returned: success}
restart_stale:
  description: restart_files written after the running process started
  type: list
  elements: str
  returned: success
definition_stale:
  description: definition_files written after the running process started
  type: list
  elements: str
  returned: success
"""


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "manager": {"type": "str", "choices": ["supervisor", "systemd"], "required": True},
            "name": {"type": "str", "required": True},
            "supervisor_conf": {"type": "path", "default": ""},
            "pending": {"type": "bool", "default": False},
            "restart_files": {"type": "list", "elements": "path", "default": []},
            "definition_files": {"type": "list", "elements": "path", "default": []},
        },
        required_if=[("manager", "supervisor", ["supervisor_conf"])],
        supports_check_mode=True,
    )
    p = module.params
    try:
        state, running = service_state(p["manager"], p["name"], p["supervisor_conf"])
    except ServiceStateError as exc:
        module.fail_json(msg=f"cannot read the state of {p['name']}: {exc}")
    up = running or state in ("STARTING", "activating")
    started = None
    if up and (p["restart_files"] or p["definition_files"]):
        pid = main_pid(p["manager"], p["name"], p["supervisor_conf"])
        started = process_started_at(pid) if pid else None
    restart_stale = changed_since(p["restart_files"], started)
    definition_stale = changed_since(p["definition_files"], started)
    module.exit_json(
        changed=False,
        state=state,
        running=running,
        up=up,
        restart_stale=restart_stale,
        definition_stale=definition_stale,
        start_needed=p["pending"] or not up or bool(restart_stale or definition_stale),
    )


if __name__ == "__main__":
    main()

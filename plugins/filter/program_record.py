"""Filters of the collection: the program record a deployed manifest carries, composed on the
controller the same way the converge module records it (one definition, in module_utils)."""

from __future__ import annotations

from typing import Any

from ansible_collections.net.ops.plugins.module_utils.net_service import program_record

DOCUMENTATION = r"""
name: program_record
short_description: The program record of a deployed manifest
author: NET ops suite
description:
  - >-
    manager, name, supervisor_conf, unit_path and the commands that start, stop, restart the
    program and ask its status, as net.ops.net_service_converge records them and
    ops_tools/programs.py reads them.
positional: name, supervisor_conf, unit_path
options:
  _input: {description: supervisor or systemd, type: str, required: true}
  name: {description: supervisor program or systemd unit name, type: str, required: true}
  supervisor_conf: {description: supervisord.conf (supervisor), type: str, default: ""}
  unit_path: {description: the program or unit file, type: str, default: ""}
"""


def _program_record(manager: str, name: str, supervisor_conf: str = "",
                    unit_path: str = "") -> dict[str, Any]:
    return program_record(manager, name, supervisor_conf, unit_path)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"program_record": _program_record}

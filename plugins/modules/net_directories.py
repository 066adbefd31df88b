#!/usr/bin/python
"""Ensure several directories with their modes (and owner) in one module run.

A node needs eight directories; one module run instead of eight keeps a no-change converge fast.
"""

from __future__ import annotations

import os
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: net_directories
short_description: Ensure a list of directories exists with the given modes, owner and group
author: NET ops suite
description:
  - >-
    Creates each missing directory and sets its mode, and owner and group where it is owned;
    reports which ones changed. Check mode touches nothing.
options:
  directories:
    description: >-
      Items {path, mode, owned}; mode is an octal string such as '0700'; owned (default false):
      the directory gets I(owner) and I(group). Parents first.
    type: list
    elements: dict
    required: true
  owner: {description: Owner of the owned directories; omit to leave it, type: str}
  group: {description: Group of the owned directories; omit to leave it, type: str}
"""

RETURN = r"""
created: {description: Directories created, type: list, returned: always}
"""


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "directories": {"type": "list", "elements": "dict", "required": True},
            "owner": {"type": "str"},
            "group": {"type": "str"},
        },
        supports_check_mode=True,
    )
    changed = False
    created: list[str] = []
    for item in module.params["directories"]:
        path = item.get("path")
        mode = item.get("mode")
        if not isinstance(path, str) or not os.path.isabs(path):
            module.fail_json(msg=f"directories: path {path!r} must be an absolute path")
        if os.path.lexists(path) and not os.path.isdir(path):
            module.fail_json(msg=f"{path} exists and is not a directory")
        if not os.path.isdir(path):
            created.append(path)
            changed = True
            if module.check_mode:
                continue
            os.makedirs(path, exist_ok=True)
        owned = bool(item.get("owned", False))
        attrs: dict[str, Any] = module.load_file_common_arguments(
            {
                "path": path,
                "mode": mode,
                "owner": module.params["owner"] if owned else None,
                "group": module.params["group"] if owned else None,
            }
        )
        if os.path.isdir(path):
            changed = module.set_fs_attributes_if_different(attrs, changed)
    module.exit_json(changed=changed, created=created)


if __name__ == "__main__":
    main()

"""Write the docs host's manifest (service.json) on the controller, where the controller is the
docs host (the local network): the same file the copy task writes on a remote host, without
opening a connection to the host for it (a converge that only switched the build needs none
otherwise). Atomic; unchanged content is not rewritten; check mode writes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible.plugins.action import ActionBase

from ops_tools import atomic

_ARGS = {"dest": {"type": "path", "required": True}, "content": {"type": "str", "required": True}}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(_ARGS)

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(argument_spec=_ARGS)
        dest = Path(args["dest"])
        try:
            same = dest.read_text() == args["content"]
        except OSError:
            same = False
        if not same and not self._task.check_mode:
            atomic.write_text(dest, args["content"], mode=0o644)
        result.update(changed=not same, dest=str(dest))
        return result

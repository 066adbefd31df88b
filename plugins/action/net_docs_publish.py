"""Publish the release and build the docs site on the controller, inside Ansible.

An action plugin (it never reaches a host) that calls ops_tools.docsite.publish directly: a
converge that changes nothing compares the digest of the publication's inputs with the one the
served site records and returns in milliseconds, where starting ``ops-tools docs publish``
cost a Python start-up and the CLI's imports (2 s and more on a loaded controller) each run.
Check mode says whether the site would change and writes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ops_tools.docsite.publish import Release, publish_site
from ops_tools.errors import OpsError

_ARGS = {
    "store": {"type": "path", "required": True},
    "site": {"type": "path", "required": True},
    "endpoints": {"type": "dict", "default": {}},
    "publish": {"type": "bool", "default": True},
    "render_dir": {"type": "path"},
    "node_kind": {"type": "str", "default": "substrate", "choices": ["substrate", "devnode"]},
    "node_binary": {"type": "path"},
    "bundle_cache": {"type": "path"},
    "force": {"type": "bool", "default": False},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(_ARGS)

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(argument_spec=_ARGS)
        release = None
        if args["publish"]:
            if not args.get("render_dir"):
                raise AnsibleActionFail(
                    "render_dir: empty; give the render output to publish (docs_release_render_dir,"
                    " default net_chainspec_dir) or set docs_publish false"
                )
            binary = args.get("node_binary")
            release = Release(Path(args["render_dir"]), args["node_kind"],
                              Path(binary) if binary else None)
        try:
            done = publish_site(
                Path(args["store"]), Path(args["site"]),
                {str(k): str(v) for k, v in (args["endpoints"] or {}).items()}, release,
                bundle_cache=Path(args["bundle_cache"]) if args.get("bundle_cache") else None,
                check=bool(self._task.check_mode), force=args["force"],
            )
        except OpsError as exc:
            raise AnsibleActionFail(str(exc)) from None
        result.update(done.to_json())
        return result

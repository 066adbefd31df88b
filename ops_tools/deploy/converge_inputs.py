"""What a converge of the local network depends on, as one digest, and the record of the last
converge that succeeded with it: a no-change ``localnet up`` whose inputs match that record, and
whose programs all run, needs no playbook run (about 12 s of Ansible for ``changed=0``).

The inputs: the playbooks, roles, collection plugins, inventory and Ansible configuration, the
suite's Python source (modules and action plugins run it), the extra vars (the rendered spec's
directory, the node binary's digest) and the spec's files, Ansible's version, and every NET_*
and ANSIBLE_* variable of the environment. Anything else (a file edited on a host by hand) is
what ``localnet up --converge`` is for.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ops_tools import atomic
from ops_tools.deploy.paths import PROJECT_ROOT

STAMP_NAME = "converged.json"
# Relative to the project root; missing ones are skipped (plugins/ comes with the collection).
TREES = ("ansible.cfg", "galaxy.yml", "meta", "playbooks", "roles", "plugins",
         "inventories/local", "ops_tools")
SKIP_PARTS = frozenset({"__pycache__", ".pytest_cache"})


def _files(root: Path, trees: Iterable[str]) -> Iterable[Path]:
    for name in trees:
        top = root / name
        if top.is_file():
            yield top
        elif top.is_dir():
            for path in sorted(top.rglob("*")):
                if path.is_file() and not SKIP_PARTS.intersection(path.parts) \
                        and path.suffix != ".pyc":
                    yield path


def inputs_digest(extravars: Mapping[str, Any], spec_dir: Path,
                  env: Mapping[str, str] | None = None, root: Path = PROJECT_ROOT) -> str:
    from ansible.release import __version__ as ansible_version

    env = os.environ if env is None else env
    digest = hashlib.sha256()

    def add(label: str, data: bytes) -> None:
        digest.update(label.encode() + b"\0" + len(data).to_bytes(8, "big") + data)

    for path in _files(root, TREES):
        add(str(path.relative_to(root)), path.read_bytes())
    for path in _files(spec_dir, ["."]):
        add(f"spec/{path.relative_to(spec_dir)}", path.read_bytes())
    add("extravars", json.dumps(dict(extravars), sort_keys=True).encode())
    add("environment", json.dumps(sorted(
        (k, v) for k, v in env.items() if k.startswith(("NET_", "ANSIBLE_")))).encode())
    add("ansible", ansible_version.encode())
    return digest.hexdigest()


def recorded(state: Path) -> dict[str, Any] | None:
    """The record of the last successful converge, or None (none, or unreadable)."""
    try:
        record = json.loads((state / STAMP_NAME).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("digest"), str) \
            or not isinstance(record.get("hosts"), list):
        return None
    return record


def record(state: Path, digest: str, hosts: list[str]) -> None:
    atomic.write_text(state / STAMP_NAME, json.dumps({"digest": digest, "hosts": hosts}))


def forget(state: Path) -> None:
    """Before a converge: one that fails half-way must not leave the old record standing."""
    (state / STAMP_NAME).unlink(missing_ok=True)

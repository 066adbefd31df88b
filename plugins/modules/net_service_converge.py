#!/usr/bin/python
"""Converge one platform service from state: its files, and a restart when what should run
differs from what was last started successfully, or when it is not running."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.net.ops.plugins.module_utils.net_node_ready import (
    NotReady,
    wait_node_ready,
)
from ansible_collections.net.ops.plugins.module_utils.net_service import (
    STOPPED_FOR_GOOD,
    ServiceStateError,
    changed_since,
    main_pid,
    process_started_at,
    program_record,
    service_state,
    supervisor_apply,
    supervisor_restart,
)

DOCUMENTATION = r"""
module: net_service_converge
short_description: Files, restart decision and readiness of one NET program
author: NET ops suite
description:
  - >-
    Writes the program's files (configuration, supervisor program or systemd unit) when their
    content or mode differ, atomically.
  - >-
    Decides a restart from state, not from the run - the digest of what should run (every file,
    and the secret files' contents) against the manifest written
    after the last successful start, and the service manager's own state; so a run interrupted
    between a change and its restart still restarts on the next run.
  - >-
    Files installed by other tasks (a node's binary, chain spec and node key) are watched -
    their sha256 is recorded in the manifest. One that changed restarts the program,
    unless the running process started after it was written (a reset cycle pushes the files,
    then starts the node itself): then the manifest records it without a restart.
  - >-
    After a (re)start waits until the program is ready - the readiness URL answers 200, or a
    node's RPC serves the expected genesis as this node (its peer id) and imports blocks - and
    only then writes the manifest; a program that never gets ready fails the task with its last
    answer. A program that needs no restart is checked too (a node: genesis and peer id).
  - >-
    The manifest records the program (C(program) - manager, name, supervisor_conf and the
    commands that start, stop, restart it and ask its status), which ops-tools reads
    (ops_tools/programs.py) instead of knowing each role's service manager.
  - >-
    With defer_restart, the files are written but nothing restarts - the record of what would
    run is left beside the manifest (C(.pending)) and returned as pending_start, for a reset
    cycle that restarts the program itself at the right moment (then promotes it).
  - Check mode reports what would change or restart and touches nothing.
options:
  name:
    description: supervisor program or systemd unit name (without .service)
    type: str
    required: true
  manager: {description: service manager, type: str, choices: [supervisor, systemd], required: true}
  supervisor_conf:
    description: supervisord.conf of the project's supervisord (required with supervisor)
    type: path
    default: ""
  owner:
    description: >-
      Owner of the directories, the secrets and the files marked owned; when an existing
      directory changes hands, everything in it goes to the new owner
    type: str
  group: {description: Their group, type: str}
  directories:
    description: Directories to keep, each path and mode.
    type: list
    elements: dict
    default: []
  files:
    description: >-
      Files to keep, each path, content, mode, owned (owner and group apply) and validate (a
      command with %s for the new file, such as C(nginx -t -c %s), run before it replaces the
      old one; a file that does not pass leaves the old one and what runs untouched).
    type: list
    elements: dict
    default: []
  secrets_dir: {description: Where the secret files go (mode 0700), type: path}
  secrets:
    description: Secret files (name, content), mode 0600; contents never appear in output.
    type: list
    elements: dict
    default: []
  unit_path:
    description: >-
      The file among files that is the systemd unit (daemon-reload when it changes) or the
      supervisor program (reread when it changes)
    type: path
    default: ""
  manifest:
    description: Where the deployed manifest is written after a successful start
    type: path
    required: true
  manifest_extra: {description: More keys for the manifest (public URL), type: dict, default: {}}
  watch:
    description: >-
      Files written by other tasks that the program reads at start; their sha256 go into the
      manifest
    type: list
    elements: path
    default: []
  ready_url: {description: URL that answers 200 when the program is ready, type: str, default: ""}
  ready_rpc:
    description: >-
      A Substrate node's readiness instead of ready_url (its JSON-RPC on the host); ready_timeout
      bounds the first answer
    type: dict
    suboptions:
      url: {description: JSON-RPC HTTP endpoint, type: str, required: true}
      genesis_hash: {description: "expected chain_getBlockHash [0]", type: str, required: true}
      peer_id:
        description: The node's own peer id; the answering node must be this one
        type: str
        default: ""
      require_advance:
        description: After a (re)start, wait for the best block to advance
        type: bool
        default: true
      block_timeout: {description: Seconds to wait for a new best block, type: int, default: 30}
  ready_timeout: {description: Seconds to wait for ready_url, type: int, default: 60}
  log_hint: {description: Where to look when the program does not get ready, type: str, default: ""}
  defer_restart:
    description: Write the files but leave the restart to the caller
    type: bool
    default: false
"""

RETURN = r"""
changed_files:
  description: paths written (or that check mode would write)
  type: list
  returned: always
restarted: {description: the service was (or would be) restarted, type: bool, returned: always}
reason: {description: why it was restarted, type: str, returned: always}
digest: {description: sha256 of what should run, type: str, returned: always}
state: {description: the service manager's state of the program, type: str, returned: always}
program:
  description: >-
    The program record the manifest carries (manager, name, supervisor_conf, unit_path,
    commands - start, stop, restart, status - each an argv)
  type: dict
  returned: always
pending_start:
  description: >-
    With defer_restart, what the caller restarts (name, manager, supervisor_conf, manifest,
    pending: the record to move onto the manifest after the restart, reload: the program or
    unit file changed); absent when nothing needs a restart
  type: dict
  returned: when deferred
"""


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _differs(path: str, content: bytes, mode: int) -> bool:
    try:
        with open(path, "rb") as fh:
            current = fh.read()
        return current != content or (os.stat(path).st_mode & 0o7777) != mode
    except FileNotFoundError:
        return True


def _write(module: AnsibleModule, spec: dict, content: bytes, mode: int,
           owner: str | None = None, group: str | None = None, validate: str = "") -> None:
    path = spec["path"]
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        if owner or group:
            module.set_owner_if_different(tmp, owner, False)
            module.set_group_if_different(tmp, group, False)
        if validate:
            rc, out, err = module.run_command(validate.replace("%s", tmp))
            if rc != 0:
                module.fail_json(msg=f"{path}: the new content does not pass {validate!r}"
                                     f" ({(err or out).strip()[-2000:]}); nothing was replaced")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _hand_over(path: str) -> None:
    """Give what the service wrote under its directory (databases, salts) to the directory's
    new owner: a service moved to a user of its own keeps its state."""
    st = os.stat(path)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chown(os.path.join(root, name), st.st_uid, st.st_gid, follow_symlinks=False)


def _ensure_dir(module: AnsibleModule, path: str, mode: int, owner: str | None,
                group: str | None) -> bool:
    exists = os.path.isdir(path)
    changed = not exists or (os.stat(path).st_mode & 0o7777) != mode
    if module.check_mode:
        return changed
    os.makedirs(path, exist_ok=True)
    os.chmod(path, mode)
    if owner or group:
        moved = module.set_owner_if_different(path, owner, False)
        moved |= module.set_group_if_different(path, group, False)
        if moved and exists:
            _hand_over(path)
        changed |= moved
    return changed


def _read_manifest(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _fingerprint(path: str) -> str:
    """sha256 of a file, read in chunks (a node binary is large); "absent" when there is none
    (check mode before a first install)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    except FileNotFoundError:
        return "absent"
    return digest.hexdigest()


def _not_ready(p: dict, after_start: bool) -> str:
    """Why the program is not ready ("" when it is)."""
    if p["ready_rpc"]:
        rpc = p["ready_rpc"]

        def running() -> tuple[str, bool]:
            try:
                return service_state(p["manager"], p["name"], p["supervisor_conf"])
            except ServiceStateError as exc:
                return str(exc), False

        try:
            wait_node_ready(rpc["url"], rpc["genesis_hash"], p["ready_timeout"], rpc["peer_id"],
                            rpc["require_advance"] and after_start, rpc["block_timeout"],
                            running, lambda: _stopped_for_good(p))
        except NotReady as exc:
            return str(exc)
        return ""
    if p["ready_url"]:
        ok, last, stopped = _wait_ready(p["ready_url"], p["ready_timeout"],
                                        lambda: _stopped_for_good(p))
        if stopped:
            return (f"the program has stopped ({stopped}) before it was ready at"
                    f" {p['ready_url']}: {last}")
        if not ok:
            return f"not ready after {p['ready_timeout']} s at {p['ready_url']}: {last}"
    return ""


def _stopped_for_good(p: dict) -> str:
    """The manager's state when the program has stopped and nothing will start it again
    ("" while it runs, starts or is being restarted by its manager)."""
    try:
        state, _ = service_state(p["manager"], p["name"], p["supervisor_conf"])
    except ServiceStateError:
        return ""  # the manager not answering says nothing about the program
    return state if state in STOPPED_FOR_GOOD else ""


def _wait_ready(url: str, timeout: int,
                stopped: Callable[[], str] | None = None) -> tuple[bool, str, str]:
    """Poll ``url`` until it answers 200 or ``timeout`` s pass: (ready, the last answer, the
    state the program stopped in). A program slow to start (a busy machine) is waited for; one
    that has stopped for good is not, as ``stopped`` tells."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    asked = 0.0
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - http(s) from inventory
                if resp.status == 200:
                    return True, "", ""
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}: {exc.read(2000).decode(errors='replace')}"
        except (urllib.error.URLError, OSError) as exc:
            last = f"no answer ({getattr(exc, 'reason', exc)})"
        now = time.monotonic()
        if now > deadline:
            return False, last, ""
        if stopped is not None and now - asked >= 1.0:
            asked = now
            state = stopped()
            if state:
                return False, last, state
        time.sleep(0.2)


def _systemctl(module: AnsibleModule, *args: str) -> None:
    proc = subprocess.run(["systemctl", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        module.fail_json(msg=f"systemctl {' '.join(args)} failed: {proc.stderr.strip()}")


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "manager": {"type": "str", "choices": ["supervisor", "systemd"], "required": True},
            "supervisor_conf": {"type": "path", "default": ""},
            "owner": {"type": "str"},
            "group": {"type": "str"},
            "directories": {"type": "list", "elements": "dict", "default": []},
            "files": {"type": "list", "elements": "dict", "default": []},
            "secrets_dir": {"type": "path"},
            "secrets": {
                "type": "list", "elements": "dict", "default": [],
                "options": {
                    "name": {"type": "str", "required": True},
                    "content": {"type": "str", "required": True, "no_log": True},
                },
            },
            "unit_path": {"type": "path", "default": ""},
            "manifest": {"type": "path", "required": True},
            "manifest_extra": {"type": "dict", "default": {}},
            "watch": {"type": "list", "elements": "path", "default": []},
            "ready_url": {"type": "str", "default": ""},
            "ready_rpc": {
                "type": "dict",
                "options": {
                    "url": {"type": "str", "required": True},
                    "genesis_hash": {"type": "str", "required": True},
                    "peer_id": {"type": "str", "default": ""},
                    "require_advance": {"type": "bool", "default": True},
                    "block_timeout": {"type": "int", "default": 30},
                },
            },
            "ready_timeout": {"type": "int", "default": 60},
            "log_hint": {"type": "str", "default": ""},
            "defer_restart": {"type": "bool", "default": False},
        },
        required_if=[("manager", "supervisor", ["supervisor_conf"])],
        mutually_exclusive=[("ready_url", "ready_rpc")],
        supports_check_mode=True,
    )
    p = module.params
    if p["secrets"] and not p["secrets_dir"]:
        module.fail_json(msg="secrets: give secrets_dir, the directory the secret files go to")
    owner, group = p["owner"], p["group"]
    dirs = [(d["path"], int(str(d.get("mode", "0750")), 8)) for d in p["directories"]]
    if p["secrets"]:
        dirs.append((p["secrets_dir"], 0o700))
    changed_dirs = [path for path, mode in dirs if _ensure_dir(module, path, mode, owner, group)]
    wanted = [(f["path"], str(f["content"]).encode(), int(str(f.get("mode", "0644")), 8),
               bool(f.get("owned")), str(f.get("validate") or "")) for f in p["files"]]
    wanted += [(os.path.join(p["secrets_dir"], s["name"]), s["content"].encode(), 0o600, True,
                "") for s in p["secrets"]]
    digest = hashlib.sha256()
    changed_files = []
    for path, content, mode, owned, validate in sorted(wanted):
        digest.update(f"{path}\0{_sha(content)}\0{mode:o}\n".encode())
        if _differs(path, content, mode):
            changed_files.append(path)
            if not module.check_mode:
                _write(module, {"path": path}, content, mode,
                       owner if owned else None, group if owned else None, validate)
    want = digest.hexdigest()

    manifest = _read_manifest(p["manifest"])
    try:
        state, running = service_state(p["manager"], p["name"], p["supervisor_conf"])
    except ServiceStateError as exc:
        module.fail_json(msg=f"cannot read the state of {p['name']}: {exc}")
    watched = {path: _fingerprint(path) for path in p["watch"]}
    moved = sorted(path for path, sha in watched.items()
                   if (manifest.get("watched") or {}).get(path) != sha)
    if manifest.get("digest") != want:
        reason = "what should run changed" if manifest else "never started by this role"
    elif not running:
        reason = f"not running ({state})"
    elif moved:
        # Written after the running process started: it does not run them yet.
        pid = main_pid(p["manager"], p["name"], p["supervisor_conf"])
        started = process_started_at(pid) if pid else None
        stale = moved if started is None else changed_since(moved, started)
        reason = f"{', '.join(stale)} changed since it started" if stale else ""
    else:
        reason = ""
    result = {"changed_files": changed_dirs + changed_files, "restarted": bool(reason),
              "reason": reason, "digest": want, "state": state,
              "program": program_record(p["manager"], p["name"], p["supervisor_conf"],
                                        p["unit_path"])}
    record = {**p["manifest_extra"], "name": p["name"], "digest": want,
              "program": result["program"]}
    if watched:
        record["watched"] = watched
    # What the manifest says about the running program (a manifest of an older role that did
    # not record the program, another public URL) is brought up to date without a restart.
    stale = {k: v for k, v in manifest.items() if k != "started_at"} != record
    if module.check_mode:
        module.exit_json(changed=bool(changed_dirs or changed_files or reason
                                      or (stale and not p["defer_restart"])), **result)
    pending = p["manifest"] + ".pending"
    if p["defer_restart"]:
        # The service goes on serving the network it was started for; no readiness wait.
        if not reason:
            module.exit_json(changed=bool(changed_dirs or changed_files), **result)
        _write(module, {"path": pending},
               (json.dumps(record, indent=2, sort_keys=True) + "\n").encode(), 0o644)
        reload = p["unit_path"] in changed_files or manifest.get("digest") is None
        module.exit_json(changed=True, pending_start={
            "name": p["name"], "manager": p["manager"], "supervisor_conf": p["supervisor_conf"],
            "manifest": p["manifest"], "pending": pending, "reload": reload}, **result)
    if not reason:
        # Running and unchanged: still prove it serves (at once when it does).
        why = _not_ready(p, after_start=False)
        if why:
            module.fail_json(msg=f"{p['name']} runs but {why}; {p['log_hint']}", **result)
        if stale:
            _write(module, {"path": p["manifest"]}, (json.dumps(
                {**record, "started_at": manifest.get("started_at")}, indent=2, sort_keys=True)
                + "\n").encode(), 0o644)
            result["changed_files"].append(p["manifest"])
        module.exit_json(changed=bool(result["changed_files"]), **result)

    try:
        if p["manager"] == "supervisor":
            if state == "UNREACHABLE":
                module.fail_json(msg=f"no supervisord answers for {p['supervisor_conf']}",
                                 **result)
            applied = supervisor_apply(p["supervisor_conf"], p["name"])
            if applied == "same":
                supervisor_restart(p["supervisor_conf"], p["name"])
        else:
            if p["unit_path"] in changed_files or manifest.get("digest") is None:
                _systemctl(module, "daemon-reload")
            _systemctl(module, "enable", f"{p['name']}.service")
            _systemctl(module, "restart", f"{p['name']}.service")
    except ServiceStateError as exc:
        module.fail_json(msg=f"{p['name']}: {exc}; {p['log_hint']}", **result)
    why = _not_ready(p, after_start=True)
    if why:
        module.fail_json(msg=f"{p['name']} was (re)started ({reason}), but {why};"
                             f" {p['log_hint']}", **result)
    record["started_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    _write(module, {"path": p["manifest"]}, (json.dumps(record, indent=2, sort_keys=True)
                                             + "\n").encode(), 0o644)
    # A deferred restart that never happened is superseded by this one.
    if os.path.exists(pending):
        os.unlink(pending)
    module.exit_json(changed=True, **result)


if __name__ == "__main__":
    main()

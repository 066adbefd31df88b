"""A service's directory that changes hands (every service ran as `net`; now each has a user of
its own: docs/hardening.md) is given to the new user with everything the service wrote in it, by
the service role's module (plugins/modules/net_service_converge.py); a symbolic link the
old owner planted there is not followed."""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path

import pytest

from tests.ansible.conftest import VENV_BIN, run, tail

pytestmark = [pytest.mark.process,
              pytest.mark.skipif(os.geteuid() != 0, reason="changing owners needs root")]
OLD, NEW = pwd.getpwnam("nobody"), pwd.getpwnam("daemon")


def converge(root: Path) -> dict:
    """The module as the service role calls it, files only (the restart deferred)."""
    args = {"name": "net-x", "manager": "supervisor", "supervisor_conf": str(root / "none.conf"),
            "owner": NEW.pw_name, "group": NEW.pw_name, "secrets_dir": str(root / "svc/secrets"),
            "directories": [{"path": str(root / "svc"), "mode": "0750"}],
            "manifest": str(root / "svc/service.json"), "defer_restart": True}
    proc = run([str(VENV_BIN / "ansible"), "localhost", "-c", "local", "-o",
                "-e", f"ansible_python_interpreter={VENV_BIN / 'python'}",
                "-m", "net.ops.net_service_converge", "-a", json.dumps(args)])
    assert proc.returncode == 0, tail(proc)
    return json.loads(proc.stdout.split("=>", 1)[1])


def owner(path: Path) -> int:
    return path.lstat().st_uid


def test_state_goes_to_the_new_user_and_links_are_not_followed(tmp_path: Path) -> None:
    svc = tmp_path / "svc"
    (svc / "db").mkdir(parents=True)
    (svc / "db" / "faucet.db").write_text("state")
    outside = tmp_path / "outside"
    outside.write_text("not the service's")
    (svc / "link").symlink_to(outside)
    for path in (svc, svc / "db", svc / "db" / "faucet.db", svc / "link", outside):
        os.chown(path, OLD.pw_uid, OLD.pw_gid, follow_symlinks=False)

    first = converge(tmp_path)
    assert str(svc) in first["changed_files"], first
    for path in (svc, svc / "db", svc / "db" / "faucet.db", svc / "link"):
        assert (owner(path), path.lstat().st_gid) == (NEW.pw_uid, NEW.pw_gid), path
    assert owner(outside) == OLD.pw_uid, "the hand-over followed a link out of the directory"
    assert (svc / "db" / "faucet.db").read_text() == "state"

    # Owned already: nothing to hand over.
    assert str(svc) not in converge(tmp_path)["changed_files"]

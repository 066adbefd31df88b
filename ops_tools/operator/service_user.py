"""The worker's own Unix user on a systemd host: created when it is the default and missing, and
able to reach the directories its unit hands it (the unit chowns them, not their parents)."""

from __future__ import annotations

import pwd
import stat
import subprocess
from pathlib import Path

from ops_tools.errors import OpsError
from ops_tools.operator.context import DEFAULT_SERVICE_USER, ROOT, Options


def closed_parent(path: Path, handed: Path | None = None) -> Path | None:
    """The first existing parent of ``path`` that other users cannot pass through (no o+x),
    e.g. root's home (0700); None when every one lets them. ``handed`` and what is below it
    do not count: the unit chowns that directory to the worker's user before each start."""
    own = handed.resolve() if handed is not None else None
    for parent in reversed(path.resolve().parents):
        if own is not None and parent.is_relative_to(own):
            continue
        try:
            mode = parent.stat().st_mode
        except FileNotFoundError:
            return None  # created by the onboarding, 0755 parents
        if not mode & stat.S_IXOTH:
            return parent
    return None


def prepare(opts: Options, emit) -> None:  # noqa: ANN001 - the context's emit
    user = opts.run_as
    if user is None or user == ROOT:
        return
    try:
        pwd.getpwnam(user)
    except KeyError:
        if user != DEFAULT_SERVICE_USER:
            raise OpsError(f"daemon: --service-user {user}: no such user; create it (useradd"
                           " --system --user-group --shell /usr/sbin/nologin --no-create-home"
                           f" {user}) or leave the option out for {DEFAULT_SERVICE_USER}") from None
        emit(f"creating the worker's unprivileged system user {user}")
        argv = ["useradd", "--system", "--user-group", "--shell", "/usr/sbin/nologin",
                "--no-create-home", "--home-dir", "/nonexistent", user]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise OpsError(f"daemon: useradd {user} failed ({done.stderr.strip()[:200]}); run"
                           " onboard as root, or create the user first") from None
    for flag, path in (("--state-dir", opts.state_dir), ("--keystore", opts.keystore_dir)):
        closed = closed_parent(path, handed=opts.state_dir)
        if closed is not None:
            raise OpsError(
                f"daemon: {flag} {path}: the worker's user {user} cannot reach it ({closed} is"
                f" {stat.filemode(closed.stat().st_mode)}, owner uid {closed.stat().st_uid});"
                f" give {flag} under /var/lib/net/operator/{opts.name}, or --service-user root"
                " to run the worker as root (not advised)")


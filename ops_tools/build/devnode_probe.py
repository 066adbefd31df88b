"""Finding the development node and asking its version: light on imports, so that a caller
can start it before loading the rest of the build code."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from ops_tools.errors import InputError, OpsError


def find_devnode(explicit: str | None = None) -> Path:
    """The devnode console script: given, else beside this Python (the venv), else on PATH."""
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise InputError(f"--devnode {explicit!r}: no such file")
        return path.resolve()
    beside = Path(sys.executable).parent / "devnode"
    if beside.is_file():
        return beside
    found = shutil.which("devnode")
    if not found:
        raise OpsError("devnode is not installed: install the suite (pip install -e .) first")
    return Path(found).resolve()


def devnode_version(devnode: Path) -> str:
    try:
        proc = subprocess.run([str(devnode), "--version"], capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL, check=False)
    except OSError as exc:
        raise OpsError(f"{devnode} does not run ({exc})") from None
    line = proc.stdout.strip().splitlines()[0] if proc.stdout.strip() else ""
    if proc.returncode != 0 or not line:
        raise OpsError(
            f"`{devnode} --version` failed (exit {proc.returncode}): "
            f"{(proc.stderr.strip() or 'no output')[-200:]}"
        )
    return line

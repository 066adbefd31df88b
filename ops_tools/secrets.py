"""Secrets from files: owner-only modes checked, never from argv (``ps`` shows it)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ops_tools.errors import InputError


def read_secret(path: str | os.PathLike[str], *, key: str = "secret file") -> str:
    """The file's content without its trailing newline. Refuses a file that anyone but its
    owner may read or write: a secret left world-readable is already half-leaked."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as exc:
        raise InputError(
            f"{key}: {p}: cannot read it ({exc.strerror}); create it with mode 0600"
        ) from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{key}: {p}: not a regular file; point it at a file with mode 0600")
    if st.st_mode & 0o077:
        raise InputError(
            f"{key}: {p}: mode {stat.S_IMODE(st.st_mode):04o} lets others read it;"
            f" run chmod 600 {p}"
        )
    value = p.read_text(encoding="utf-8").rstrip("\r\n")
    if not value:
        raise InputError(f"{key}: {p}: the file is empty; put the secret in it")
    return value

"""Secrets from files (``ops_tools.secrets``: owner-only modes checked) or the environment;
never from argv."""

from __future__ import annotations

import os

from ops_tools.errors import InputError
from ops_tools.secrets import read_secret


def secret_from(file: str | os.PathLike[str] | None, env: str, *, key: str) -> str:
    """A secret from ``file`` when given, else from the environment variable ``env``."""
    if file:
        return read_secret(file, key=key)
    value = os.environ.get(env, "")
    if not value:
        raise InputError(f"{key}: not set; give a file (mode 0600) or set {env}")
    return value

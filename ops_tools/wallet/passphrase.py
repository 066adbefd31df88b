"""Where the keystore passphrase comes from. Never from a command-line value (``ps`` shows it).

Order: ``--passphrase-file FILE`` (explicit, wins), then ``$NET_WALLET_PASSPHRASE``, then a
hidden prompt on the terminal (asked twice when creating an account). Without any of them and
without a terminal the command stops instead of waiting for input that never comes.
"""

from __future__ import annotations

import getpass
import os
import stat
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from ops_tools.errors import InputError

PASSPHRASE_ENV = "NET_WALLET_PASSPHRASE"  # noqa: S105 - the variable's name, not a secret

Prompt = Callable[[str], str]


def read_passphrase_file(path: Path) -> str:
    """The file's text without one trailing newline (what ``echo pass > file`` adds)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(
            f"--passphrase-file: cannot read {str(path)!r} ({exc.strerror or exc}); give a readable"
            " file holding the passphrase"
        ) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"--passphrase-file: {str(path)!r} is not UTF-8 text") from exc
    if text.endswith("\r\n"):
        text = text[:-2]
    elif text.endswith("\n"):
        text = text[:-1]
    return text


def file_is_shared(path: Path) -> bool:
    """True when group or others may read the file: worth a warning, not a refusal."""
    try:
        return bool(path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO))
    except OSError:
        return False


def resolve_passphrase(
    passphrase_file: Path | None,
    *,
    confirm: bool,
    env: Mapping[str, str] | None = None,
    interactive: bool | None = None,
    prompt: Prompt = getpass.getpass,
) -> str:
    env = os.environ if env is None else env
    if passphrase_file is not None:
        return read_passphrase_file(passphrase_file)
    if PASSPHRASE_ENV in env:
        return env[PASSPHRASE_ENV]
    if interactive is None:
        interactive = sys.stdin.isatty()
    if not interactive:
        raise InputError(
            f"passphrase: none given and no terminal to ask on; set {PASSPHRASE_ENV} or pass"
            " --passphrase-file FILE"
        )
    first = prompt("Keystore passphrase: ")
    if confirm:
        if not first:
            raise InputError("passphrase: empty; choose a non-empty passphrase")
        if prompt("Repeat passphrase: ") != first:
            raise InputError("passphrase: the two entries differ; run the command again")
    return first

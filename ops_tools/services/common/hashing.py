"""Salted hashes: how services store addresses and IPs they must compare but not keep."""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import tempfile
from pathlib import Path

from ops_tools.errors import InputError

SALT_BYTES = 32


def salted_hash(salt: bytes, value: str) -> str:
    """Keyed BLAKE2b (32 bytes, hex): equal values compare equal under one salt, and nobody
    without the salt can test a guess against the stored hash."""
    return hashlib.blake2b(value.encode("utf-8"), key=salt, digest_size=32).hexdigest()


def load_or_create_salt(path: Path) -> bytes:
    """The salt in ``path``, created (0600) on first use. Losing it forgets every limit, so it
    lives in the service's state directory next to its database."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".salt.", dir=path.parent)
        try:
            os.write(fd, secrets.token_bytes(SALT_BYTES))
            os.fsync(fd)
            os.close(fd)
            # link() fails when the name exists: two instances starting at once agree on the
            # first salt, and nobody ever reads a half-written one.
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        finally:
            os.unlink(tmp)
    data = path.read_bytes()
    if len(data) < 16:
        raise InputError(f"salt file: {path}: {len(data)} bytes is too short; delete the file")
    return data

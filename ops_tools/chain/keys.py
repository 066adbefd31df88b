"""The network's account format and keypairs from secrets."""

from __future__ import annotations

import os

from substrateinterface import Keypair

from ops_tools.errors import InputError
from ops_tools.secrets import read_secret

# The generic Substrate prefix, which the network's chain properties declare; a service that
# talks to a chain reads it from there (``substrate.ss58_prefix``).
SS58_FORMAT = 42


def keypair_from_secret(secret: str, *, key: str, ss58_format: int = SS58_FORMAT) -> Keypair:
    """A mnemonic, a 0x seed or a secret URI (``//Name``, ``phrase//hard/soft``). ``key`` names
    where the secret came from; the secret itself is never in the message."""
    try:
        return Keypair.create_from_uri(secret.strip(), ss58_format=ss58_format)
    except Exception:
        raise InputError(
            f"{key}: not a mnemonic, 0x seed or secret URI (//Name); fix its content"
        ) from None


def keypair_from_file(path: str | os.PathLike[str], *, key: str,
                      ss58_format: int = SS58_FORMAT) -> Keypair:
    """The keypair in ``path`` (mode 0600, ``ops_tools.secrets.read_secret``)."""
    return keypair_from_secret(read_secret(path, key=key), key=f"{key}: {path}",
                               ss58_format=ss58_format)

"""The salt of a service's hashed limit keys, one for every instance on a database.

A configured secret file (the same on every host, from the vault) wins; else the salt is kept
in the service's own ``<prefix>_shared`` table, created once by the first instance under an
advisory lock. A per-instance salt would make two instances on one database hash the same
client differently: each would enforce its own limit.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from sqlalchemy import Column, MetaData, String, Table, Text, insert, select

from ops_tools.errors import InputError
from ops_tools.services.common.db import Database
from ops_tools.services.common.secrets import read_secret

SALT_BYTES = 32
MIN_CONFIGURED = 16


def shared_table(metadata: MetaData, prefix: str) -> Table:
    """``<prefix>_shared``: named values every instance on the database shares."""
    return Table(
        f"{prefix}_shared", metadata,
        Column("name", String(32), primary_key=True),
        Column("value", Text, nullable=False),
    )


def database_salt(db: Database, table: Table, legacy: bytes | None = None) -> bytes:
    """The database's salt, created once (from ``legacy``, an instance's own salt of earlier
    versions, when there is one: the limits it counted stay valid)."""
    with db.session(write=True) as s:
        db.lock(s, f"{table.name}:salt")
        value = s.scalar(select(table.c.value).where(table.c.name == "salt"))
        if value is None:
            value = (legacy or secrets.token_bytes(SALT_BYTES)).hex()
            s.execute(insert(table).values(name="salt", value=value))
    return bytes.fromhex(value)


def load_salt(db: Database, table: Table, salt_file: Path | None,
              legacy_file: Path | None = None) -> bytes:
    """``salt_file`` (0600, at least 16 characters) when configured, else the database's."""
    if salt_file is not None:
        salt = read_secret(salt_file, key="salt_file").encode()
        if len(salt) < MIN_CONFIGURED:
            raise InputError(f"salt_file: {salt_file}: {len(salt)} bytes is too short; put at"
                             f" least {MIN_CONFIGURED} random characters in it")
        return salt
    legacy = legacy_file.read_bytes() if legacy_file is not None and legacy_file.is_file() \
        else None
    return database_salt(db, table, legacy)

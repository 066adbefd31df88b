"""Fixtures of the services' suites: a real PostgreSQL server, a fresh database per test on
SQLite and on PostgreSQL, and a development node."""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.services.postgres import PostgresServer, pg_bindir, running_postgres
from tests.support.devnode import DevNode, run_devnode

_names = itertools.count()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    if pg_bindir() is None:
        pytest.fail("PostgreSQL is not installed; run scripts/bootstrap")
    base = Path(tempfile.mkdtemp(prefix="net-pg-"))
    with running_postgres(base / "cluster", free_port()) as server:
        yield server


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.process)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty database of each kind."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'service.db'}"
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.create_database(f"test_{next(_names)}_{free_port()}")


@pytest.fixture(scope="session")
def devnode(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevNode]:
    """One development node (``--dev``: //Alice authors and is endowed) for the session."""
    with run_devnode(tmp_path_factory.mktemp("devnode"), ["--dev"]) as node:
        yield node

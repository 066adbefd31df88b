"""Fixtures of the attestation service's tests: a seed file and an app on a real devnode."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ops_tools.services.attestation.app import build_app
from ops_tools.services.attestation.config import AttestationSettings
from tests.support.devnode import DevNode

SEED_TEXT = "service-test-seed-5b9e0c1d7a3f46e2"


@pytest.fixture
def seed_file(tmp_path: Path) -> Path:
    path = tmp_path / "mock-root-seed"
    path.write_text(SEED_TEXT + "\n")
    os.chmod(path, 0o600)
    return path


@pytest.fixture
def make_client(tmp_path: Path, seed_file: Path, devnode: DevNode
                ) -> Iterator[Callable[..., TestClient]]:
    """``make_client(database_url=..., **settings)``: a client of a freshly built app; calling it
    again on the same database is a restart."""
    opened: list[TestClient] = []

    def make(database_url: str | None = None, **overrides: Any) -> TestClient:
        settings = AttestationSettings(**{
            "listen_port": 8002, "state_dir": tmp_path / "state", "rpc_url": devnode.ws,
            "database_url": database_url or f"sqlite:///{tmp_path / 'attest.db'}",
            "mock_root_seed_file": seed_file, **overrides,
        })
        client = TestClient(build_app(settings), client=("127.0.0.1", 50000))
        client.__enter__()
        opened.append(client)
        return client

    yield make
    for client in opened:
        client.__exit__(None, None, None)

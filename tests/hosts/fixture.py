"""pytest fixture for systemd test hosts (registered in tests/conftest.py): `testhosts(names)`
boots a fleet once per session and set of names, and every fleet is stopped at the end of the
session, also when a test failed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.hosts.hosts import Fleet, TestHostError, boot_fleet, missing_tools, stop_fleet


@pytest.fixture(scope="session")
def testhosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Fleet]]:
    if missing := missing_tools():
        pytest.skip(f"systemd test hosts need {', '.join(missing)} (scripts/bootstrap as root)")
    fleets: dict[tuple[str, ...], Fleet] = {}

    def get(*names: str) -> Fleet:
        if names not in fleets:
            fleets[names] = boot_fleet(list(names), tmp_path_factory.mktemp("testhosts"))
        return fleets[names]

    try:
        yield get
    finally:
        errors = []
        for fleet in fleets.values():
            try:
                stop_fleet(Path(fleet.state_dir))
            except TestHostError as exc:
                errors.append(str(exc))
        if errors:
            pytest.fail("; ".join(errors))

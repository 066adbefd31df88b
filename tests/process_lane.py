"""The two lanes of the suite: tests that start a process, and the fast lane of everything else.

A test is in the process lane (marked ``process``) when it uses a fixture of ``PROCESS_FIXTURES``
(directly or through another fixture) or carries the mark itself (``pytestmark`` of a module
whose tests start programs with ``subprocess``). ``pytest --fast`` (``make test-fast``) runs the
unmarked rest and fails any of them that starts a process anyway: a new test that spawns gets
marked the first time someone runs the fast lane, not never.
"""

from __future__ import annotations

import _posixsubprocess
import os
import subprocess
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

MARK = "process"

# Fixtures whose set-up starts a long-running program (or several), by the directory of the
# conftest.py that defines them (pytest's baseid): a development node, a PostgreSQL cluster,
# supervisord, sshd, nginx, systemd-nspawn hosts, the local network, the services on top of
# them. Pytest resolves
# fixtures transitively, so a fixture built on one of these (``funded_faucet`` on ``devnode``)
# is covered without being listed.
PROCESS_FIXTURES: dict[str, frozenset[str]] = {
    # Fixtures of plugin modules (tests/conftest.py's pytest_plugins) belong to no directory.
    "": frozenset({"testhosts"}),  # systemd-nspawn test hosts (tests/hosts/fixture.py)
    "tests/ansible": frozenset({"rendered_spec"}),  # ansible-playbook
    "tests/build": frozenset({"suite", "cache", "cargo_spy"}),  # cargo
    "tests/devnode": frozenset({"node", "raw_spec"}),  # devnode processes, devnode build-spec
    "tests/docsite": frozenset({"renders", "bundle", "site", "nginx"}),  # mkdocs build, nginx
    "tests/operator": frozenset({"specs", "keystores", "localnet", "sshd", "artifacts",
                                 "operator", "ports_net"}),
    "tests/reset_scheduler": frozenset({"controller"}),  # supervisord
    "tests/services": frozenset({"postgres_server", "devnode"}),
    "tests/services/explorer": frozenset({"stack"}),  # the services and Chromium
    "tests/services/gateway": frozenset({"chain", "keystore_operator", "gateway", "worker",
                                         "engine"}),
    "tests/services/indexer": frozenset({"chain"}),
    "tests/wallet": frozenset({"wallet", "made_account"}),  # wallet-cli as a subprocess
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast", action="store_true",
        help="the fast lane: deselect tests marked 'process' and fail any other test that"
             " starts a process (make test-fast)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARK}: starts a process (node, database, server, subprocess); not in make test-fast",
    )


def _process_fixture(name: str, defs: Sequence[Any]) -> bool:
    # The last definition is the one in effect for the test (the closest conftest.py).
    return bool(defs) and name in PROCESS_FIXTURES.get(defs[-1].baseid.split("::")[0], ())


def starts_process(item: pytest.Item) -> bool:
    # "slow" is the older mark of the end-to-end tests: real processes, several nodes.
    if item.get_closest_marker(MARK) is not None or item.get_closest_marker("slow") is not None:
        return True
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(_process_fixture(n, defs) for n, defs in info.name2fixturedefs.items())


# Names a test module imports when its tests start the local network, which runs on fixed ports
# under the machine-wide lock (tests/localnet_lock.py): one xdist worker runs them all in turn.
LOCALNET_NAMES = frozenset({"localnet_lock", "localnet_stack"})


def xdist_group(item: pytest.Item) -> str:
    """The xdist group of a process test (``--dist loadgroup``): the local network's tests on
    one worker (fixed ports, one lock), the systemd test hosts' on one (one fleet per session,
    not per worker), and otherwise the test's file, so a module's fixtures start once."""
    module = getattr(item, "module", None)
    if module is not None and LOCALNET_NAMES.intersection(vars(module)):
        return "localnet"
    if "testhosts" in getattr(item, "fixturenames", ()):
        return "testhosts"
    return item.nodeid.split("::")[0]


# First, so that `-m process` / `-m "not process"` select on the marks added here, and xdist
# (whose own hook runs last) sees the groups.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    fast: list[pytest.Item] = []
    deselected: list[pytest.Item] = []
    for item in items:
        if starts_process(item):
            if item.get_closest_marker(MARK) is None:
                item.add_marker(MARK)
            if item.get_closest_marker("xdist_group") is None:
                item.add_marker(pytest.mark.xdist_group(xdist_group(item)))
            deselected.append(item)
        else:
            fast.append(item)
    if config.getoption("fast"):
        config.hook.pytest_deselected(items=deselected)
        items[:] = fast


class ProcessInFastLane(AssertionError):
    """An unmarked test started a process."""


_guarded: list[str] = []  # the node id of the test running under the guard, if any


def _refuse(name: str) -> None:
    if _guarded:
        raise ProcessInFastLane(
            f"{_guarded[-1]} starts a process ({name}) but is not marked '{MARK}': mark the"
            f" module (pytestmark = pytest.mark.{MARK}) or, when a fixture starts it, add the"
            " fixture to PROCESS_FIXTURES in tests/process_lane.py"
        )


def _guard(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(*args: Any, **kwargs: Any) -> Any:
        _refuse(name)
        return real(*args, **kwargs)

    guarded.__wrapped__ = real  # type: ignore[attr-defined]
    return guarded


# Every way a Python program starts another one: subprocess (and asyncio's subprocesses,
# which use it), multiprocessing (fork, or _posixsubprocess for spawn/forkserver), os.*.
_PATCHES: list[tuple[Any, str]] = [
    (subprocess.Popen, "_execute_child"),
    (_posixsubprocess, "fork_exec"),
    (os, "fork"), (os, "forkpty"), (os, "posix_spawn"), (os, "posix_spawnp"), (os, "system"),
]


def install_guard() -> None:
    for owner, attr in _PATCHES:
        real = getattr(owner, attr)
        if not hasattr(real, "__wrapped__"):
            setattr(owner, attr, _guard(f"{getattr(owner, '__name__', owner)}.{attr}", real))


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    if session.config.getoption("fast"):
        install_guard()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    # Set-up, call and teardown: a session fixture's first set-up happens inside the first test.
    guard = item.config.getoption("fast") and not starts_process(item)
    if guard:
        _guarded.append(item.nodeid)
    try:
        yield
    finally:
        if guard:
            _guarded.pop()

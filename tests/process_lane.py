"""The two lanes of the suite: tests that start a process, and the fast lane of everything else.

A test is in the process lane (marked ``process``) when it uses a fixture of ``PROCESS_FIXTURES``
(directly or through another fixture) or carries the mark itself (``pytestmark`` of a module
whose tests start programs with ``subprocess``). ``pytest --fast`` (``make test-fast``) runs the
unmarked rest and fails any of them that starts a process anyway: a new test that spawns gets
marked the first time someone runs the fast lane, not never.
"""

from __future__ import annotations

import _posixsubprocess
import contextlib
import json
import os
import re
import subprocess
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests import netns

MARK = "process"

# Fixtures whose set-up starts a long-running program (or several), by the directory of the
# conftest.py that defines them, or by the file of the test module that does (pytest's baseid):
# a development node, a PostgreSQL cluster, supervisord, sshd, nginx, systemd-nspawn hosts, the
# local network, the services on top of them. Pytest resolves fixtures transitively, so a fixture
# built on one of these (``funded_faucet`` on ``devnode``) is covered without being listed.
PROCESS_FIXTURES: dict[str, frozenset[str]] = {
    # Fixtures of plugin modules (tests/conftest.py's pytest_plugins) belong to no directory.
    "": frozenset({"testhosts"}),  # systemd-nspawn test hosts (tests/hosts/fixture.py)
    "tests/ansible": frozenset({"rendered_spec"}),  # ansible-playbook
    "tests/build": frozenset({"suite", "cache", "cargo_spy"}),  # cargo
    # A test module's own fixtures, by its file: a cargo build, ops-tools node devnode-bundle.
    "tests/build/test_artifact.py": frozenset({"built_once"}),
    "tests/build/test_devnode_bundle.py": frozenset({"bundle"}),
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
    config.pluginmanager.register(_GroupsHeld(), "process-lane-groups")
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
# So does a module that imports the helpers of tests/localnet.py, or the module itself.
LOCALNET_NAMES = frozenset({"localnet_lock", "localnet_stack"})
LOCALNET_MODULE = "tests.localnet"
SHARED_NETWORK = "shared_localnet"  # the fixture of the shared default network (tests/conftest.py)
# Two lanes of local networks: the shared default network's modules in the machine's network
# namespace ("localnet"), and the modules that start networks of their own in a namespace of
# their worker's own ("localnet-own", tests/netns.py), on the same fixed ports, at the same time.
# Where no namespace can be made (not root), both are one lane, as before.
LOCALNET = "localnet"
LOCALNET_OWN = "localnet-own"


def _uses_localnet(module: Any) -> bool:
    for name, value in vars(module).items():
        if name in LOCALNET_NAMES or getattr(value, "__name__", None) == LOCALNET_MODULE:
            return True
        if callable(value) and getattr(value, "__module__", None) == LOCALNET_MODULE:
            return True
    return False


def xdist_group(item: pytest.Item) -> str:
    """The xdist group of one process test on its own (``--dist loadgroup``): the local
    network's tests on one worker (fixed ports, one lock), the systemd test hosts' on one (one
    fleet per session, not per worker), and otherwise the test's file, so a module's fixtures
    start once. ``module_groups`` makes the choice once for a whole module."""
    module = getattr(item, "module", None)
    # The shared default network is one per process: its users must be on the lane's worker,
    # or a second worker starts another one and holds the lock while the lane waits.
    if SHARED_NETWORK in getattr(item, "fixturenames", ()):
        return LOCALNET
    if module is not None and _uses_localnet(module):
        return LOCALNET_OWN if netns.available() else LOCALNET
    if "testhosts" in getattr(item, "fixturenames", ()):
        return "testhosts"
    return item.nodeid.split("::")[0]


# The shared groups, strongest first: a module with a process test in one of them puts all its
# process tests there.
_RANK = {LOCALNET: 0, LOCALNET_OWN: 1, "testhosts": 2}


def module_groups(items: list[pytest.Item]) -> dict[str, str]:
    """The group of each module's process tests, by file. One group per module, because a
    module-scoped fixture is set up on every worker that runs one of its tests: a module whose
    tests went half to ``testhosts`` and half to their file (tests/build/test_devnode_bundle.py)
    would build its module fixture twice, on two workers at once."""
    groups: dict[str, str] = {}
    for item in items:
        path, group = item.nodeid.split("::")[0], xdist_group(item)
        current = groups.setdefault(path, group)
        if _RANK.get(group, len(_RANK)) < _RANK.get(current, len(_RANK)):
            groups[path] = group
    return groups


# What each xdist group took in a CI run (seconds, summed over its tests' set-up, call and
# tear-down; ``scripts/lane-costs`` writes it from a run's ``--durations`` report). Only the
# order of the work depends on it: a stale or missing figure costs speed, never a result.
LANE_COSTS = Path(__file__).with_name("lane_costs.json")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s+(?:setup|call|teardown)\s+.+@([^@\s]+)\s*$")


def costs_from_durations(lines: Iterable[str]) -> dict[str, float]:
    """Seconds per xdist group, from the lines of pytest's ``--durations`` report of a run under
    xdist (each grouped test's node id ends in ``@group``)."""
    costs: dict[str, float] = {}
    for line in lines:
        match = _DURATION.match(line)
        if match:
            costs[match[2]] = round(costs.get(match[2], 0.0) + float(match[1]), 1)
    return dict(sorted(costs.items(), key=lambda kv: -kv[1]))


def _group_of(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("xdist_group")
    if marker is None:
        return None
    return str(marker.args[0] if marker.args else marker.kwargs.get("name", ""))


def longest_first(items: list[pytest.Item], costs: dict[str, float]) -> list[pytest.Item]:
    """The groups that took longest first, then the other process tests, then the fast ones, each
    in collection order. xdist's ``loadgroup`` hands out its queue in collection order (with
    ``--no-loadscope-reorder``; by default it sorts by test count, which started a 100 s
    one-test module on the run's last minute): longest first leaves the short ones to even out
    the workers' ends."""
    def key(item: pytest.Item) -> tuple[int, float]:
        group = _group_of(item)
        if group is None:
            return (2, 0.0)
        return (0, -costs[group]) if group in costs else (1, 0.0)
    return sorted(items, key=key)


def read_costs(path: Path = LANE_COSTS) -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(path.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}




def shared_network_together(items: list[pytest.Item]) -> list[pytest.Item]:
    """The tests on the shared default network moved up to the first of them, in their order
    (those of a module that says ``SHARED_NETWORK_LAST`` after the others), the rest as they
    were: one ``localnet up`` serves them all unless a network of another module's own comes
    between them and purges it."""
    shared = [item for item in items if SHARED_NETWORK in getattr(item, "fixturenames", ())]
    if not shared:
        return items
    # A module that stops the network's programs on purpose says SHARED_NETWORK_LAST: the others
    # then never start on a network that is just coming back (sorted() keeps the order otherwise).
    first = items.index(shared[0])
    shared = sorted(shared, key=lambda item: bool(getattr(getattr(item, "module", None),
                                                              "SHARED_NETWORK_LAST", False)))
    ids = {id(item) for item in shared}
    rest = [item for item in items if id(item) not in ids]
    return rest[:first] + shared + rest[first:]


# First, so that `-m process` / `-m "not process"` select on the marks added here, and xdist
# (whose own hook runs last) sees the groups.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    process = [item for item in items if starts_process(item)]
    groups = module_groups([item for item in process
                            if item.get_closest_marker("xdist_group") is None])
    fast: list[pytest.Item] = []
    deselected: list[pytest.Item] = []
    chosen = {id(item) for item in process}
    for item in items:
        if id(item) in chosen:
            if item.get_closest_marker(MARK) is None:
                item.add_marker(MARK)
            if item.get_closest_marker("xdist_group") is None:
                item.add_marker(pytest.mark.xdist_group(groups[item.nodeid.split("::")[0]]))
            deselected.append(item)
        else:
            fast.append(item)
    if config.getoption("fast"):
        config.hook.pytest_deselected(items=deselected)
        items[:] = fast
    else:
        _refuse_session_servers_across_namespaces(items)
    items[:] = shared_network_together(longest_first(items, read_costs()))


def _refuse_session_servers_across_namespaces(items: list[pytest.Item]) -> None:
    """A session fixture that starts a program (sshd, a server on loopback) is one per worker,
    started in whichever network namespace its first user runs: a test of the second lane
    (tests/netns.py) and a test outside it cannot both reach it. Such a module gets a fixture
    of its own, module-scoped (tests/operator/test_onboard_e2e_localnet.py's sshd)."""
    if not netns.available():
        return
    for item in items:
        if _group_of(item) != LOCALNET_OWN:
            continue
        info = getattr(item, "_fixtureinfo", None)
        for name, defs in (info.name2fixturedefs.items() if info is not None else ()):
            if defs and defs[-1].scope == "session" and _process_fixture(name, defs):
                raise pytest.UsageError(
                    f"{item.nodeid} runs in the {LOCALNET_OWN!r} lane's network namespace but"
                    f" uses the session fixture {name!r}, which starts a program in the"
                    " namespace of its first user: give the module a module-scoped"
                    f" {name!r} of its own (tests/netns.py)")


_LOST_GROUP = pytest.StashKey[str]()


class _GroupsHeld:
    """On an xdist worker under ``--dist loadgroup``, after xdist's own hook: every grouped test
    carries its group in its node id, which is all the scheduler sees. A pytest whose node ids
    drop it (9.2 with pytest-xdist 3.8, issue 1386 there) scatters every group over all workers
    without a word: module fixtures on every worker, two local networks at once. Such a test
    fails before its fixtures start, saying why (an error raised here would only crash the
    worker, and the controller shows no reason)."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        if not getattr(config.option, "loadgroup", False):
            return
        for item in items:
            mark = item.get_closest_marker("xdist_group")
            if mark is not None and "@" not in item.nodeid:
                item.stash[_LOST_GROUP] = str(mark.args[0] if mark.args else mark.kwargs)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if (group := item.stash.get(_LOST_GROUP, None)) is not None:
            pytest.fail(
                f"--dist loadgroup lost this test's group {group!r}: pytest {pytest.__version__}"
                " with this pytest-xdist does not keep the group in the node id, so the group's"
                " tests would run on every worker; install the versions pyproject.toml pins"
                " (scripts/bootstrap --test) or run serially (make test N=0)", pytrace=False)


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
    # Set-up, call and teardown: a session fixture's first set-up happens inside the first test,
    # a module fixture's teardown inside the module's last.
    guard = item.config.getoption("fast") and not starts_process(item)
    if guard:
        _guarded.append(item.nodeid)
    own = _group_of(item) == LOCALNET_OWN and netns.available()
    try:
        with netns.lane() if own else contextlib.nullcontext():
            yield
    finally:
        if guard:
            _guarded.pop()

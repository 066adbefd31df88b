"""The fast lane's rules (tests/process_lane.py), on a small suite run in this process: a test
that uses a process fixture is marked and left out of ``--fast``; an unmarked test that starts a
process fails there, naming what to do; ``free_port`` hands out ports nobody else gets; and under
xdist a module's fixtures start once, the test hosts' tests on one worker."""

from __future__ import annotations

import socket

import pytest

from tests.conftest import ROOT, free_port

pytest_plugins = ["pytester"]

SUITE = {
    # A process fixture by the directory that defines it, as PROCESS_FIXTURES lists it.
    "tests/services/conftest.py": """
import pytest

@pytest.fixture
def devnode():
    return "a development node"
""",
    "tests/services/test_suite.py": """
import subprocess

import pytest

def test_on_the_node(devnode):
    subprocess.run(["true"], check=True)

@pytest.mark.process
def test_marked_by_hand():
    subprocess.run(["true"], check=True)

def test_pure():
    assert sum([1, 2]) == 3

def test_spawns_unmarked():
    subprocess.run(["true"], check=True)

def test_forks_unmarked():
    import os
    if os.fork() == 0:  # only if the guard let it through
        os._exit(0)
""",
}


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(**{path.removesuffix(".py"): body for path, body in SUITE.items()})
    return pytester


def test_process_tests_are_marked_from_their_fixtures_and_by_hand(suite: pytest.Pytester) -> None:
    result = suite.runpytest_inprocess("-p", "tests.process_lane", "-m", "process",
                                       "--collect-only", "-q")
    listed = {line.split("::")[-1] for line in result.outlines if "::" in line}
    assert listed == {"test_on_the_node", "test_marked_by_hand"}


def test_the_fast_lane_fails_an_unmarked_test_that_starts_a_process(
    suite: pytest.Pytester,
) -> None:
    result = suite.runpytest_inprocess("-p", "tests.process_lane", "--fast", "-p", "no:xdist")
    result.assert_outcomes(passed=1, failed=2, deselected=2)
    text = result.stdout.str()
    for name in ("test_spawns_unmarked", "test_forks_unmarked"):
        assert f"test_suite.py::{name} starts a process" in text
    assert "Popen._execute_child" in text and "os.fork" in text
    assert "pytestmark = pytest.mark.process" in text


def test_free_port_is_not_handed_out_again_but_a_server_gets_it() -> None:
    ports = {free_port() for _ in range(50)}
    assert len(ports) == 50
    for _ in range(500):
        with socket.socket() as other:
            other.bind(("127.0.0.1", 0))
            assert other.getsockname()[1] not in ports
    with socket.socket() as server:  # as uvicorn, aiohttp, nginx, sshd, PostgreSQL bind
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", ports.pop()))
        server.listen()


# Under xdist (--dist loadgroup) a module-scoped fixture is set up on every worker that runs one
# of its module's tests. Each module fixture here records its set-up with the worker's id.
XDIST_SUITE = {
    # As tests/hosts/fixture.py's: a plugin module's fixture (no directory).
    "hostsplugin.py": """
import pytest

@pytest.fixture(scope="session")
def testhosts():
    return "a fleet"
""",
    "conftest.py": """
import os

import pytest

@pytest.fixture(scope="module")
def built(request):
    with open(os.environ["NET_SETUPS"], "a") as setups:
        setups.write(f"{request.module.__name__} {os.environ.get('PYTEST_XDIST_WORKER')}\\n")
""",
    # Half of its tests use the test hosts: the module's fixture must still be built once.
    "tests/pkg/test_mixed.py": """
import pytest

pytestmark = pytest.mark.process

@pytest.mark.parametrize("i", range(4))
def test_built_alone(built, i):
    pass

def test_on_a_host(built, testhosts):
    pass
""",
    "tests/pkg/test_plain.py": """
import pytest

pytestmark = pytest.mark.process

@pytest.mark.parametrize("i", range(8))
def test_plain(built, i):
    pass
""",
    "tests/hosts/test_hosts_only.py": """
import pytest

@pytest.mark.parametrize("i", range(4))
def test_host(built, testhosts, i):
    pass
""",
}


@pytest.mark.process  # pytest and its xdist workers in subprocesses
def test_under_xdist_a_module_fixture_is_set_up_once_and_the_test_hosts_on_one_worker(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytester.makepyfile(**{path.removesuffix(".py"): body for path, body in XDIST_SUITE.items()})
    setups = pytester.path / "setups.txt"
    monkeypatch.setenv("NET_SETUPS", str(setups))
    # The workers import tests.process_lane and the plugin.
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}:{pytester.path}")
    result = pytester.runpytest_subprocess("-p", "tests.process_lane", "-p", "hostsplugin",
                                           "-n", "3", "--dist", "loadgroup", timeout=300)
    result.assert_outcomes(passed=17)
    lines = setups.read_text().split()
    modules, workers = lines[0::2], dict(zip(lines[0::2], lines[1::2], strict=True))
    assert sorted(modules) == ["test_hosts_only", "test_mixed", "test_plain"]  # once each
    # The modules that use the test hosts run on the same worker (one fleet per run).
    assert workers["test_mixed"] == workers["test_hosts_only"]


class _Item:
    def __init__(self, name: str, *fixtures: str, module: object = None) -> None:
        self.name, self.fixturenames, self.module = name, fixtures, module


class _LastModule:
    SHARED_NETWORK_LAST = True


def test_the_shared_networks_tests_move_up_to_the_first_of_them_in_their_order() -> None:
    from tests.process_lane import SHARED_NETWORK, shared_network_together

    items = [_Item("a"), _Item("backup", SHARED_NETWORK), _Item("deploy", "tmp_path"),
             _Item("drills", SHARED_NETWORK), _Item("e"), _Item("monitoring", SHARED_NETWORK)]
    ordered = shared_network_together(items)  # type: ignore[arg-type]
    assert [i.name for i in ordered] == ["a", "backup", "drills", "monitoring", "deploy", "e"]
    plain = [_Item("x"), _Item("y")]
    assert shared_network_together(plain) == plain  # type: ignore[arg-type]


def test_a_module_that_disturbs_the_shared_network_runs_after_the_others_on_it() -> None:
    from tests.process_lane import SHARED_NETWORK, shared_network_together

    items = [_Item("a"), _Item("deploy-1", SHARED_NETWORK, module=_LastModule),
             _Item("deploy-2", SHARED_NETWORK, module=_LastModule),
             _Item("drills", SHARED_NETWORK), _Item("e"), _Item("monitoring", SHARED_NETWORK)]
    ordered = shared_network_together(items)  # type: ignore[arg-type]
    assert [i.name for i in ordered] == ["a", "drills", "monitoring", "deploy-1", "deploy-2", "e"]


class _Grouped(_Item):
    def __init__(self, name: str, group: str | None) -> None:
        super().__init__(name)
        self.group = group

    def get_closest_marker(self, name: str):
        return pytest.mark.xdist_group(self.group).mark if self.group and \
            name == "xdist_group" else None


def test_groups_are_handed_out_longest_first_then_unknown_ones_then_the_fast_tests() -> None:
    from tests.process_lane import costs_from_durations, longest_first

    report = [
        "============================= slowest 80 durations =============================",
        "617.16s call     tests/a.py::test_x[authority]@tests/a.py",
        "12.50s setup    tests/a.py::test_y@tests/a.py",
        "90.00s call     tests/b.py::test_z[a b@c]@localnet",
        "3.00s call     tests/c.py::test_fast",
        "(20 durations < 0.005s hidden.  Use -vv to show these durations.)",
    ]
    costs = costs_from_durations(report)
    assert costs == {"tests/a.py": 629.7, "localnet": 90.0}
    items = [_Grouped("fast", None), _Grouped("new", "tests/new.py"),
             _Grouped("b1", "localnet"), _Grouped("a1", "tests/a.py"), _Grouped("b2", "localnet")]
    ordered = longest_first(items, costs)  # type: ignore[arg-type]
    assert [i.name for i in ordered] == ["a1", "b1", "b2", "new", "fast"]


def test_a_module_on_the_shared_network_is_in_the_local_networks_lane() -> None:
    """It needs no import of tests/localnet.py (the fixture comes from tests/conftest.py): the
    fixture itself puts it there, or another worker starts a second shared network and holds
    the machine's lock while the lane waits for it."""
    import types

    from tests.process_lane import SHARED_NETWORK, xdist_group

    class Shared:
        module = types.ModuleType("test_uses_the_shared_network")
        fixturenames = (SHARED_NETWORK, "tmp_path")
        nodeid = "tests/deploy/test_shared.py::test_x"

    class Plain(Shared):
        fixturenames = ("tmp_path",)

    assert xdist_group(Shared()) == "localnet"  # type: ignore[arg-type]
    assert xdist_group(Plain()) == "tests/deploy/test_shared.py"  # type: ignore[arg-type]


def test_a_module_with_a_network_of_its_own_is_in_the_second_lane_where_a_namespace_can_be_made(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A module that starts networks of its own runs in the worker's own network namespace
    (tests/netns.py), beside the shared network's lane; where none can be made, in that lane."""
    import types

    from tests import process_lane
    from tests.process_lane import LOCALNET, LOCALNET_OWN, SHARED_NETWORK, module_groups

    own = types.ModuleType("test_own_network")
    own.localnet_lock = object()  # type: ignore[attr-defined]

    class Own:
        module = own
        fixturenames = ("tmp_path",)
        nodeid = "tests/reset/test_own.py::test_x"

    class SharedToo(Own):  # a module with both: the shared network's lane holds it
        fixturenames = (SHARED_NETWORK,)
        nodeid = "tests/deploy/test_both.py::test_shared"

    class OwnToo(Own):
        nodeid = "tests/deploy/test_both.py::test_own"

    monkeypatch.setattr(process_lane.netns, "available", lambda: True)
    assert process_lane.xdist_group(Own()) == LOCALNET_OWN  # type: ignore[arg-type]
    assert module_groups([OwnToo(), SharedToo()]) == {  # type: ignore[list-item]
        "tests/deploy/test_both.py": LOCALNET}
    monkeypatch.setattr(process_lane.netns, "available", lambda: False)
    assert process_lane.xdist_group(Own()) == LOCALNET  # type: ignore[arg-type]


def test_a_session_server_in_the_second_lane_is_refused_at_collection(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """sshd of the session starts in the namespace of its first user: a module of the second
    lane that uses it could not reach it (or leave it unreachable to the others)."""
    import types

    from tests import process_lane

    def fixture(scope: str, baseid: str) -> types.SimpleNamespace:
        return types.SimpleNamespace(scope=scope, baseid=baseid)

    class Item:
        nodeid = "tests/operator/test_own.py::test_x"
        own_marker = pytest.mark.xdist_group(process_lane.LOCALNET_OWN).mark

        def __init__(self, sshd: types.SimpleNamespace) -> None:
            self._fixtureinfo = types.SimpleNamespace(name2fixturedefs={"sshd": [sshd]})

        def get_closest_marker(self, name: str) -> object:
            return self.own_marker if name == "xdist_group" else None

    monkeypatch.setattr(process_lane.netns, "available", lambda: True)
    session = Item(fixture("session", "tests/operator"))
    with pytest.raises(pytest.UsageError, match=r"session fixture 'sshd'.*module-scoped"):
        process_lane._refuse_session_servers_across_namespaces([session])  # type: ignore[list-item]
    own = Item(fixture("module", "tests/operator/test_own.py"))
    process_lane._refuse_session_servers_across_namespaces([own])  # type: ignore[list-item]

"""The fast lane's rules (tests/process_lane.py), on a small suite run in this process: a test
that uses a process fixture is marked and left out of ``--fast``; an unmarked test that starts a
process fails there, naming what to do; and ``free_port`` hands out ports nobody else gets."""

from __future__ import annotations

import socket

import pytest

from tests.conftest import free_port

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

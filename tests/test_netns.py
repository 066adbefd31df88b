"""The second lane's network namespace (tests/netns.py): a port bound in the machine's namespace
is free inside it, what a test starts inside lives there, and the thread comes back out."""

from __future__ import annotations

import socket
import subprocess

import pytest

from tests import netns

pytestmark = [
    pytest.mark.process,  # runs ip (tests/process_lane.py)
    pytest.mark.skipif(not netns.available(), reason="making a network namespace needs root"
                       " (CAP_SYS_ADMIN) and iproute2's ip"),
]


def _listener() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_the_same_loopback_port_is_bound_inside_and_outside_and_each_side_sees_its_own() -> None:
    with _listener() as home:
        port = home.getsockname()[1]
        with netns.lane():
            assert netns.inside()
            assert not _accepts(port), "the machine's listener is reachable from the lane"
            with socket.socket() as own:
                own.bind(("127.0.0.1", port))  # taken outside, free here
                own.listen()
                assert _accepts(port)
                # A program started inside lives there: it reaches the lane's listener.
                probe = subprocess.run(
                    ["python3", "-c", "import socket, sys; s = socket.socket();"
                     f" sys.exit(s.connect_ex(('127.0.0.1', {port})))"],
                    capture_output=True, timeout=60, check=False)
                assert probe.returncode == 0
                links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True,
                                       text=True, timeout=30, check=True).stdout.splitlines()
                assert [line.split(":")[1].strip() for line in links] == ["lo"]
        assert not netns.inside()
        assert _accepts(port), "the thread did not come back to the machine's namespace"


def test_the_lane_is_one_namespace_for_the_whole_process() -> None:
    with netns.lane():
        first = _listener()
    try:
        with netns.lane():
            # The listener made in the first visit is still there in the second.
            assert _accepts(first.getsockname()[1])
    finally:
        first.close()

"""Fixtures shared by every suite. Suites keep their own fixtures in their own conftest.py."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that no other ``free_port()`` (in any xdist worker) and no other
    bind to port 0 on this machine hands out for the next minute, for a server the test starts.

    The port is left in TIME_WAIT: a connection to it was accepted and the accepting side closed
    first. The kernel then skips it for every bind to port 0, while a server that binds it by
    number with SO_REUSEADDR (uvicorn, asyncio, aiohttp, nginx, PostgreSQL, sshd and the
    development node all set it) gets it at once. A plain "bind to 0, read, close" releases the
    port for anyone, and under xdist another worker's next port can be the same one.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        with socket.create_connection((host, port), timeout=5) as client:
            accepted, _ = listener.accept()
            accepted.close()  # the accepting side closes first: its end goes to TIME_WAIT
            client.recv(1)  # the close reached the client before it closes its end
    return port


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture(scope="session")
def vectors_dir() -> Path:
    """The public chain spec vectors of ../shared/testdata (or $CHAINSPEC_VECTORS_DIR)."""
    env = os.environ.get("CHAINSPEC_VECTORS_DIR")
    candidates = [Path(env)] if env else []
    candidates.append(ROOT.parent / "shared" / "testdata" / "chainspecs")
    for c in candidates:
        if c.is_dir():
            return c
    pytest.skip(
        "public chain spec vectors not found: expected ../shared/testdata/chainspecs next to the"
        " project, or a directory in $CHAINSPEC_VECTORS_DIR"
    )


@pytest.fixture(scope="session")
def shared_localnet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], Any]]:
    """The shared default local network (tests/localnet.py), as a call that gives it checked.
    Imported here, not at the top: only the modules that start a network load tests.localnet."""
    from tests import localnet

    yield lambda: localnet.shared_network(tmp_path_factory)
    localnet.release_shared_network()


# The systemd test hosts' fixture (`testhosts`), for every suite that deploys to real hosts; the
# process mark, its automatic marking and the fast lane's guard (`pytest --fast`); with
# NET_CPU_PROFILE=FILE, each test's processor time (tests/cpu_profile.py).
pytest_plugins = ["tests.hosts.fixture", "tests.process_lane",
                  *(["tests.cpu_profile"] if os.environ.get("NET_CPU_PROFILE") else [])]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Every skip of the run and its reason, grouped, at the very end: a skip for a tool that
    scripts/bootstrap installs is a defect of the machine's set-up, not of the test."""
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    reasons: dict[str, int] = {}
    for report in skipped:
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    terminalreporter.section(f"skipped: {len(skipped)} test(s)")
    for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"{count:4d}  {reason}")

"""@polkadot/api (the client of polkadot.js apps, explorers and dapps) against ``devnode --dev``.

One run of ``js/client_suite.mjs`` per module; each test checks one part of its report. The
same script runs against the local network's public endpoint in tests/deploy/test_localnet_e2e.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.devnode_js import client
from tests.support.devnode import free_port, rpc

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

DEVNODE = Path(sys.executable).with_name("devnode")


@pytest.fixture(scope="module")
def dev_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``devnode --dev`` on free loopback ports; yields its HTTP URL."""
    rpc_port = free_port()
    log = tmp_path_factory.mktemp("devnode-js") / "devnode.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(DEVNODE), "--dev", "--rpc-port", str(rpc_port), "--port", str(free_port()),
             "--prometheus-port", str(free_port())],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    url = f"http://127.0.0.1:{rpc_port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"devnode --dev exited:\n{log.read_text()[-3000:]}"
            try:
                rpc(url, "system_health")
                break
            except (OSError, urllib.error.URLError):
                assert time.monotonic() < deadline, "devnode --dev did not serve RPC"
                time.sleep(0.2)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)


@pytest.fixture(scope="module")
def report(dev_node: str) -> dict[str, Any]:
    problem = client.ensure_installed()
    assert not problem, problem
    return client.run_client_suite(dev_node.replace("http://", "ws://"))


def test_the_pinned_client_version_is_installed():
    assert client.ensure_installed() == ""
    assert client.installed_version() == client.pinned_version()


def test_connects_without_warnings_and_reads_chain_properties(report, dev_node):
    properties = rpc(dev_node, "system_properties")
    assert properties["tokenSymbol"] == "UNIT"
    client.check_connection(report, token_symbol=properties["tokenSymbol"])
    assert report["chain"] == "Development"
    assert report["specVersion"] == 6


def test_a_transfer_is_seen_in_block_then_finalized(report):
    client.check_transfer(report)


def test_register_at_min_stake_and_one_planck_below(report):
    client.check_registration(report)


def test_heartbeat_for_the_current_epoch_and_two_ahead(report):
    client.check_heartbeats(report)


def test_finalized_heads_subscription_advances(report):
    client.check_finalized_heads(report)

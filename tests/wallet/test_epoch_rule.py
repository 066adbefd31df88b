"""The heartbeat epoch rule on a real node whose epochs pass quickly.

``devnode --dev`` has 100-block epochs of 6 s slots, so epoch 0 lasts ten minutes and
HeartbeatEpochInPast (epoch < last_heartbeat_epoch) cannot happen in a test. This module runs
the same node binary on the dev chain spec with two changes, made the way an operator would
(``build-spec``, edit, ``--chain <file> --alice --tmp``): 1 s slots and 2-block epochs.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator

import pytest

from tests.support.devnode import DEVNODE, DevNode, fund, run_devnode

from .conftest import Wallet, assert_clean_failure

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

TOKEN = 10**12
RULE = "epoch >= last_heartbeat_epoch and epoch - last_heartbeat_epoch <= 1"


@pytest.fixture(scope="module")
def fast_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevNode]:
    workdir = tmp_path_factory.mktemp("fastnode")
    plain = subprocess.run([str(DEVNODE), "build-spec", "--chain", "dev"], capture_output=True,
                           text=True, timeout=120, check=True).stdout
    spec = json.loads(plain)
    patch = spec["genesis"]["runtimeGenesis"]["patch"]
    patch["aura"]["slotDurationMs"] = 1000
    patch["operatorStake"]["epochLength"] = 2
    spec_path = workdir / "fast-epochs.json"
    spec_path.write_text(json.dumps(spec))
    with run_devnode(workdir, ["--chain", str(spec_path), "--alice", "--tmp"]) as node:
        yield node


def test_epoch_in_past_and_too_far_ahead_then_the_remedy_works(fast_node, tmp_path):
    w = Wallet(tmp_path / "keystore")
    rpc = ["--rpc-url", fast_node.ws]
    created = w.run("new", "beat", "--json")
    assert created.returncode == 0, created.stderr
    address = created.json()["ss58_address"]
    fund(fast_node, {address: 10 * TOKEN})
    substrate = fast_node.reader()
    try:
        min_stake = int(substrate.get_constant("OperatorStake", "MinStake").value)
        assert int(substrate.get_constant("OperatorStake", "EpochLength").value) == 2
        registered = w.run("register-operator", "beat", "--stake", str(min_stake), *rpc)
        assert registered.returncode == 0, registered.stdout + registered.stderr
        last = int(substrate.query("OperatorStake", "Operators", [address]).value[
            "last_heartbeat_epoch"])
        # Funding and registering took at least two blocks after block 1.
        assert last >= 1

        before = w.snapshot()
        past = w.run("heartbeat-test", "beat", "--submit", "--epoch", str(last - 1), *rpc)
        assert_clean_failure(past, 1, "OperatorStake.HeartbeatEpochInPast",
                             f"epoch {last - 1} is before the last heartbeat epoch", RULE,
                             f"last_heartbeat_epoch of {address} is {last}",
                             "current epoch (OperatorStake.CurrentEpoch) is")

        ahead = w.run("heartbeat-test", "beat", "--submit", "--epoch", str(last + 2), "--json",
                      *rpc)
        assert ahead.returncode == 1
        body = ahead.json()
        assert body["ok"] is False
        assert body["error"]["name"] == "HeartbeatEpochTooFarAhead"
        assert RULE in body["error"]["remedy"]
        assert w.snapshot() == before
        stored = substrate.query("OperatorStake", "Operators", [address]).value
        assert int(stored["last_heartbeat_epoch"]) == last

        # The remedy names an epoch (or a range) that the chain then accepts.
        todo = re.search(r"pass --epoch (\d+)|pass an epoch from (\d+) to (\d+)", past.stderr)
        assert todo, past.stderr
        epoch = int(todo.group(3) or todo.group(1))
        assert last <= epoch <= last + 1
        beat = w.run("heartbeat-test", "beat", "--submit", "--epoch", str(epoch), *rpc)
        assert beat.returncode == 0, beat.stdout + beat.stderr
        assert "OperatorStake.HeartbeatReceived" in beat.stdout
        stored = substrate.query("OperatorStake", "Operators", [address]).value
        assert int(stored["last_heartbeat_epoch"]) == epoch
    finally:
        substrate.close()

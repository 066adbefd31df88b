"""The worker's liveness loop keeps one WebSocket for its extrinsics (ops_tools/worker/
liveness.py); when the node restarts under it, the next submission fails and the one after it
goes through on a fresh connection. Against a real development node, restarted by PID."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from substrateinterface import Keypair, SubstrateInterface

from ops_tools.chain.urls import http_url
from ops_tools.wallet import operator
from ops_tools.worker.config import WorkerSettings
from ops_tools.worker.liveness import Liveness
from tests.support.devnode import DevNode

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)


@pytest.fixture
def node(tmp_path) -> Iterator[DevNode]:
    dev = DevNode(tmp_path / "node", "dev")
    try:
        yield dev.start()
    finally:
        dev.stop()


def test_a_lost_connection_is_replaced_on_the_next_submission(node, tmp_path):
    bob = Keypair.create_from_uri("//Bob")
    suri = tmp_path / "suri"
    suri.write_text("//Bob")
    settings = WorkerSettings(rpc_url=node.ws, dev_suri_file=suri)
    liveness = Liveness(settings, bob, [])
    try:
        reader = SubstrateInterface(url=http_url(node.ws), ss58_format=42)
        stake = operator.min_stake(reader)
        liveness._submit("OperatorStake.register", lambda sub: operator.register(
            sub, bob, stake, "0x" + "00" * 32))
        kept = liveness._writer()
        node.stop()
        node.start()
        epoch = operator.current_epoch(SubstrateInterface(url=http_url(node.ws), ss58_format=42))
        with pytest.raises(Exception):  # noqa: B017 - whatever the dead socket raises
            liveness._chain_heartbeats([epoch])
        liveness._chain_heartbeats([epoch])
        assert liveness._writer() is not kept
        record = operator.operator_record(
            SubstrateInterface(url=http_url(node.ws), ss58_format=42), bob.ss58_address)
        assert record is not None and int(record["last_heartbeat_epoch"]) == epoch
    finally:
        liveness.stop()

"""A stopping node tells its WebSocket subscribers it is going away (close code 1001), as a
Substrate node does, instead of leaving them open until its HTTP server gives up on them."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from websockets.sync.client import connect

from tests.conftest import free_port
from tests.support.devnode import DEVNODE
from tests.support.devnode import rpc as rpc_call

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)


def test_sigint_closes_websocket_subscriptions_with_going_away(tmp_path: Path) -> None:
    port = free_port()
    log = (tmp_path / "devnode.log").open("wb")
    proc = subprocess.Popen(
        [str(DEVNODE), "--dev", "--tmp", "--rpc-port", str(port), "--port", str(free_port()),
         "--no-prometheus"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                rpc_call(f"http://127.0.0.1:{port}", "system_health")
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "node did not start"
                time.sleep(0.3)
        with connect(f"ws://127.0.0.1:{port}") as ws:
            ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "chain_subscribeNewHeads",
                                "params": []}))
            assert "result" in json.loads(ws.recv(timeout=30))
            proc.send_signal(signal.SIGINT)
            closed = None
            try:
                while True:
                    ws.recv(timeout=60)
            except Exception as exc:  # the close frame ends the iteration
                closed = exc
            assert ws.close_code == 1001, f"{closed!r}"
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()

"""A real development node (``devnode --dev``) as a process on free loopback ports.

Skips, with the reason, only while ``devnode --version`` does not run (the node is written in
parallel with this suite); once it runs, a node that fails to start is a test failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from substrateinterface import Keypair, SubstrateInterface

from tests.conftest import free_port

DEVNODE = Path(sys.executable).with_name("devnode")
START_TIMEOUT_S = 90


def devnode_missing_reason() -> str | None:
    try:
        proc = subprocess.run([str(DEVNODE), "--version"], capture_output=True, text=True,
                              timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{DEVNODE} --version did not run ({exc})"
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return f"{DEVNODE} --version exited {proc.returncode}: {tail}"
    return None


def rpc_call(http_url: str, method: str, params: list[Any] | None = None) -> Any:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []})
    assert http_url.startswith("http://127.0.0.1:")
    headers = {"Content-Type": "application/json"}
    req = urllib.request.Request(http_url, body.encode(), headers)
    with urllib.request.urlopen(req, timeout=10) as resp:
        answer = json.loads(resp.read())
    if "error" in answer:
        raise RuntimeError(f"{method}: {answer['error']}")
    return answer["result"]


@dataclass
class DevNode:
    ws_url: str
    http_url: str
    log: Path

    def substrate(self) -> SubstrateInterface:
        """A WebSocket client, for submitting; keep it short-lived: the node pings idle
        WebSocket clients and drops those that do not answer, and substrate-interface only
        answers pings while it is reading."""
        return SubstrateInterface(url=self.ws_url, ss58_format=42)

    def reader(self) -> SubstrateInterface:
        """An HTTP client for storage and constants: no connection to go stale between tests."""
        return SubstrateInterface(url=self.http_url, ss58_format=42)

    def best_number(self) -> int:
        return int(rpc_call(self.http_url, "chain_getHeader")["number"], 16)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=15)


@contextlib.contextmanager
def run_devnode(workdir: Path, extra_args: list[str]) -> Iterator[DevNode]:
    reason = devnode_missing_reason()
    if reason:
        pytest.skip(f"development node not available yet: {reason}")
    rpc_port, p2p_port = free_port(), free_port()
    log = workdir / "devnode.log"
    with log.open("wb") as log_fh:
        proc = subprocess.Popen(
            [str(DEVNODE), *extra_args, "--rpc-port", str(rpc_port), "--port", str(p2p_port),
             "--no-prometheus"],
            stdout=log_fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, cwd=workdir,
        )
    node = DevNode(f"ws://127.0.0.1:{rpc_port}", f"http://127.0.0.1:{rpc_port}", log)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"devnode exited with {proc.returncode} at start:\n{node.log_tail()}")
            with contextlib.suppress(OSError, urllib.error.URLError, RuntimeError, ValueError):
                if node.best_number() >= 1:
                    break
            if time.monotonic() > deadline:
                pytest.fail(f"devnode authored no block in {START_TIMEOUT_S} s:\n{node.log_tail()}")
            time.sleep(0.5)
        yield node
    finally:
        _stop(proc)


def fund(node: DevNode, amounts: dict[str, int], source: str = "//Alice") -> None:
    """Transfers from an endowed development account, all in flight at once; waits for all."""
    substrate = node.substrate()
    try:
        signer = Keypair.create_from_uri(source, ss58_format=42)
        nonce = substrate.get_account_nonce(signer.ss58_address)
        for offset, (dest, value) in enumerate(amounts.items()):
            call = substrate.compose_call("Balances", "transfer_keep_alive",
                                          {"dest": dest, "value": value})
            xt = substrate.create_signed_extrinsic(call=call, keypair=signer, nonce=nonce + offset)
            last = offset == len(amounts) - 1
            receipt = substrate.submit_extrinsic(xt, wait_for_inclusion=last)
            if last:
                assert receipt.is_success, receipt.error_message
        for dest, value in amounts.items():
            # Transfers of one sender apply in nonce order, so all are in by the last one's block.
            assert free_balance(substrate, dest) >= value
    finally:
        substrate.close()


def free_balance(substrate: SubstrateInterface, address: str) -> int:
    return int(substrate.query("System", "Account", [address]).value["data"]["free"])

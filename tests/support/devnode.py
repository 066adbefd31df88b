"""Start and stop ``devnode`` processes on free loopback ports (for tests and benchmarks): the
one development-node harness of the suite.

Every node runs in its own process group, so ``stop`` ends it and anything it started. A node
that does not start is an error of the test that needed it, never a skip.
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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from substrateinterface import Keypair, SubstrateInterface

from tests.conftest import free_port

BIN = Path(sys.executable).parent
DEVNODE = str(BIN / "devnode")
START_TIMEOUT_S = 90


def devnode(
    *args: str, stdin: str | None = None, check: bool = False
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [DEVNODE, *args], capture_output=True, text=True, input=stdin, timeout=120
    )
    if check and proc.returncode != 0:
        raise RuntimeError(f"devnode {' '.join(args)} failed: {proc.stderr}")
    return proc


def rpc(url: str, method: str, params: list[Any] | None = None, timeout: float = 10) -> Any:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []}
    ).encode()
    req = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        reply = json.loads(resp.read())
    if "error" in reply:
        raise RuntimeError(f"{method}: {reply['error']}")
    return reply["result"]


class DevNode:
    """One devnode process with a base path, free RPC/p2p/Prometheus ports and a log file."""

    def __init__(
        self,
        base: Path,
        chain: str | None,
        *extra: str,
        name: str = "node",
        validator_key: str | None = "alice",
        prometheus: bool = True,
    ) -> None:
        """``chain`` None: ``extra`` says which (``--dev``)."""
        self.base, self.chain, self.name = base, chain, name
        self.rpc_port, self.prom_port, self.p2p_port = free_port(), free_port(), free_port()
        self.args = [
            DEVNODE,
            *(["--chain", chain] if chain is not None else []),
            "--base-path",
            str(base),
            "--name",
            name,
            "--rpc-port",
            str(self.rpc_port),
            "--port",
            str(self.p2p_port),
            *(["--prometheus-port", str(self.prom_port)] if prometheus else ["--no-prometheus"]),
            *extra,
        ]
        if validator_key:
            # Validators need a persistent node key (Substrate >= 1.11 refuses to start without).
            self.key_file = base.parent / f"{name}-node.key"
            if not self.key_file.exists():
                devnode("key", "generate-node-key", "--file", str(self.key_file), check=True)
            self.args += [f"--{validator_key}", "--node-key-file", str(self.key_file)]
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = base.parent / f"{name}-{self.rpc_port}.log"

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.rpc_port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.rpc_port}"

    def substrate(self) -> SubstrateInterface:
        """A WebSocket client, for submitting; keep it short-lived: the node pings idle
        WebSocket clients and drops those that do not answer, and substrate-interface only
        answers pings while it is reading."""
        return SubstrateInterface(url=self.ws, ss58_format=42)

    def reader(self) -> SubstrateInterface:
        """An HTTP client for storage and constants: no connection to go stale between tests."""
        return SubstrateInterface(url=self.http, ss58_format=42)

    def start(self, wait: bool = True) -> DevNode:
        self.base.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            self.args, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(
                    f"devnode exited with {self.proc.returncode}:\n{self.logs()[-4000:]}"
                )
            try:
                self.call("system_health")
                return
            except (OSError, urllib.error.URLError, RuntimeError):
                time.sleep(0.2)
        raise RuntimeError(f"devnode did not serve RPC within {timeout}s:\n{self.logs()[-4000:]}")

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def call(self, method: str, params: list[Any] | None = None) -> Any:
        return rpc(self.http, method, params)

    def best(self) -> int:
        return int(self.call("chain_getHeader")["number"], 16)

    def finalized(self) -> int:
        return int(
            self.call("chain_getHeader", [self.call("chain_getFinalizedHead")])["number"], 16
        )

    def bootnode(self) -> str:
        return f"/ip4/127.0.0.1/tcp/{self.p2p_port}/p2p/{self.call('system_localPeerId')}"

    def wait_for(
        self,
        predicate: Callable[[], bool],
        timeout: float = 30,
        what: str = "condition",
        interval: float = 0.2,
    ) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(interval)
        raise AssertionError(f"timed out waiting for {what}:\n{self.logs()[-3000:]}")

    def stop(self, sig: int = signal.SIGTERM) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
                self.proc.wait(timeout=15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        self._log.close()
        code = self.proc.returncode
        self.proc = None
        return code



@contextlib.contextmanager
def run_devnode(workdir: Path, extra_args: list[str]) -> Iterator[DevNode]:
    """A node started with ``extra_args`` (``--dev``; ``--chain <spec> --alice --tmp``), once
    it authored its first block; stopped at the end."""
    node = DevNode(workdir / "base", None, *extra_args, validator_key=None, prometheus=False)
    node.start(wait=False)
    try:
        node.wait_ready(START_TIMEOUT_S)
        node.wait_for(lambda: node.best() >= 1, START_TIMEOUT_S, what="the first block")
        yield node
    finally:
        node.stop()


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

def plain_spec(
    path: Path,
    *,
    chain_id: str = "test_net",
    slot_ms: int = 500,
    epoch_length: int = 10,
    authorities: tuple[str, ...] = ("Alice",),
    chain_type: str = "Local",
    extra: dict[str, Any] | None = None,
) -> Path:
    """A plain spec derived from the built-in dev chain: short slots, the given authorities."""
    from ops_tools.devnode.crypto import keypair_from_suri, ss58

    plain = json.loads(
        devnode("build-spec", "--chain", "dev", "--disable-default-bootnode", check=True).stdout
    )
    plain["name"], plain["id"], plain["chainType"] = f"Test {chain_id}", chain_id, chain_type
    patch = plain["genesis"]["runtimeGenesis"]["patch"]
    patch["aura"] = {
        "authorities": [ss58(keypair_from_suri(f"//{a}", "Sr25519").public) for a in authorities],
        "slotDurationMs": slot_ms,
    }
    patch["grandpa"]["authorities"] = [
        [ss58(keypair_from_suri(f"//{a}", "Ed25519").public), 1] for a in authorities
    ]
    patch["operatorStake"]["epochLength"] = epoch_length
    for key, value in (extra or {}).items():
        patch[key] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(plain, indent=2))
    return path


def raw_spec(plain: Path) -> Path:
    raw = plain.with_name(plain.stem + "-raw.json")
    out = devnode(
        "build-spec", "--chain", str(plain), "--raw", "--disable-default-bootnode", check=True
    ).stdout
    raw.write_text(out)
    return raw

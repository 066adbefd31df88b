"""The faucet as its own process (``python -m ops_tools.services.faucet.cli --config FILE``,
what the ``net-faucet`` console script runs) against a real development node."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from substrateinterface import Keypair

from tests.conftest import ROOT, free_port
from tests.support.devnode import DevNode, fund

DRIP = 2_000_000_000_000  # 2 tokens
FAUCET_SEED = "//FaucetUnderTest"
FAUCET_KEY = Keypair.create_from_uri(FAUCET_SEED, ss58_format=42)


@dataclass
class Running:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path
    config: Path

    def post(self, body: Any = None, *, headers: dict[str, str] | None = None,
             content: bytes | None = None, timeout: float = 120) -> httpx.Response:
        if content is None:
            content = json.dumps(body).encode()
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        return httpx.post(self.url + "/drip-public", content=content, headers=hdrs,
                          timeout=timeout)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def faucet_config(tmp: Path, node: DevNode, *, database_url: str | None = None,
                  seed: str = FAUCET_SEED, **overrides: Any) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    seed_file = tmp / "faucet.seed"
    seed_file.write_text(seed + "\n")
    os.chmod(seed_file, 0o600)
    limits = {
        "recipient_window_s": 3600,
        "per_ip": {"count": 1000, "window_s": 3600},
        "global_per_hour": 1000,
        "balance_cap_plancks": 5 * DRIP,
        **overrides.pop("limits", {}),
    }
    cfg: dict[str, Any] = {
        "listen_port": free_port(),
        "state_dir": str(tmp / "state"),
        "rpc_url": node.ws,
        "seed_file": str(seed_file),
        "drip_plancks": DRIP,
        "poll_interval_s": 0.1,
        "limits": limits,
        **overrides,
    }
    if database_url:
        cfg["database_url"] = database_url
    path = tmp / "faucet.yml"
    path.write_text(json.dumps(cfg))  # JSON is YAML
    return path


@contextlib.contextmanager
def run_faucet(config: Path, log: Path | None = None,
               env: dict[str, str] | None = None) -> Iterator[Running]:
    port = json.loads(config.read_text())["listen_port"]
    log = log or config.with_suffix(".log")
    with log.open("ab") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ops_tools.services.faucet.cli", "--config", str(config)],
            cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
            env={**{k: v for k, v in os.environ.items() if not k.startswith("NET_")},
                 **(env or {})},
        )
    running = Running(f"http://127.0.0.1:{port}", proc, log, config)
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(running.url + "/health", timeout=1).status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"faucet did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.1)
        yield running
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="session")
def funded_faucet(devnode: DevNode) -> DevNode:
    fund(devnode, {FAUCET_KEY.ss58_address: 10**18})
    return devnode


def fresh(tag: str) -> str:
    return Keypair.create_from_uri(f"//faucet-test/{tag}/{time.time_ns()}",
                                   ss58_format=42).ss58_address

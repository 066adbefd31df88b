"""The attestation service and the explorer as real processes (their console scripts), on
free loopback ports, ready when ``/ready`` says so; stopped by PID afterwards."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import free_port

BIN = Path(sys.executable).parent


@dataclass
class Service:
    url: str
    log: Path
    proc: subprocess.Popen[bytes]


@contextlib.contextmanager
def run_service(name: str, workdir: Path, config: dict[str, Any],
                timeout_s: float = 60) -> Iterator[Service]:
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    cfg = workdir / f"{name}.yml"
    cfg.write_text(json.dumps({"listen_port": port, "state_dir": str(workdir / "state"),
                               **config}))
    log = workdir / f"{name}.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NET_")}
    with log.open("wb") as fh:
        proc = subprocess.Popen([str(BIN / f"net-{name}"), "--config", str(cfg)], env=env,
                                stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    service = Service(f"http://127.0.0.1:{port}", log, proc)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(service.url + "/ready", timeout=2).status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"net-{name} did not get ready:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield service
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

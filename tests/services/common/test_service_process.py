"""The platform as a running service: a sample service started as its own process (as a
supervisor program or systemd unit starts one), asked with curl and httpx."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import ROOT, free_port
from tests.support.devnode import DevNode

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

TOKEN = "tok-3f9a1c5e7b2d4f60"


@dataclass
class Running:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def lines(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines()
                if line.startswith("{")]


def _config(tmp: Path, port: int, **extra: object) -> Path:
    cfg = {"listen_port": port, "state_dir": str(tmp / "state"), "max_body_bytes": 1024,
           "slow_s": 1.5, **extra}
    path = tmp / "sample.yml"
    path.write_text(json.dumps(cfg))  # JSON is YAML
    return path


@contextmanager
def sample_service(tmp: Path, **extra: object) -> Iterator[Running]:
    port = free_port()
    token = tmp / "token"
    token.write_text(TOKEN + "\n")
    os.chmod(token, 0o600)
    cfg = _config(tmp, port, token_file=str(token), **extra)
    log = tmp / "service.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.services.common.sample.app", "--config", str(cfg)],
            cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
        )
    running = Running(f"http://127.0.0.1:{port}", proc, log)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(running.url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"sample service did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.1)
        yield running
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, devnode: DevNode) -> Iterator[Running]:
    with sample_service(tmp_path_factory.mktemp("sample"), rpc_url=devnode.ws) as running:
        yield running


def curl(*args: str) -> tuple[int, dict, str]:
    out = subprocess.run(["curl", "-sS", "-D", "-", *args], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    head, _, body = out.partition("\n\n")  # text mode turned CRLF into LF
    status = int(head.split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in
               (line.partition(":") for line in head.splitlines()[1:])}
    return status, headers, body


def test_platform_endpoints(service: Running, devnode: DevNode) -> None:
    assert httpx.get(service.url + "/health").json()["status"] == "ok"
    assert httpx.get(service.url + "/version").json()["service"] == "sample"
    ready = httpx.get(service.url + "/ready")
    assert ready.status_code == 200, ready.text
    genesis = next(c for c in ready.json()["checks"] if c["name"] == "chain")["detail"]
    assert genesis == devnode.substrate().get_block_hash(0)
    assert "/notes" in httpx.get(service.url + "/openapi.json").json()["paths"]
    httpx.post(service.url + "/notes", json={"text": "counted"})
    metrics = httpx.get(service.url + "/metrics").text
    assert 'net_http_requests_total{method="POST",route="/notes",service="sample",status="201"}' \
        in metrics


def test_request_id_is_echoed_and_logged(service: Running) -> None:
    r = httpx.post(service.url + "/notes", json={"text": "hello"},
                   headers={"X-Request-Id": "abc-123"})
    assert r.status_code == 201 and r.headers["x-request-id"] == "abc-123"
    generated = httpx.get(service.url + "/notes").headers["x-request-id"]
    assert len(generated) == 32
    time.sleep(0.2)
    access = [e for e in service.lines() if e.get("request_id") == "abc-123"]
    assert {e["msg"] for e in access} >= {"request", "note added with token <redacted>"}


@pytest.mark.parametrize(("args", "status", "code", "needle"), [
    (["-H", "Content-Type: text/plain", "-d", "hi"], 415, "unsupported_media_type",
     "send application/json"),
    (["-H", "Content-Type: application/json", "-d", "{not json"], 400, "invalid_json", "JSON"),
    (["-H", "Content-Type: application/json", "-d", "[1]"], 400, "invalid_body", "JSON object"),
    (["-H", "Content-Type: application/json", "-d", "{}"], 400, "invalid_field", "text"),
    (["-H", "Content-Type: application/json", "-d", '{"text": "a", "x": 1}'], 400,
     "unknown_field", "x"),
    (["-H", "Content-Type: application/json", "-d", '{"text": " "}'], 400, "invalid_field",
     "text: empty"),
    (["-H", "Content-Type: application/json", "-d", '{"text": "' + "a" * 2000 + '"}'], 413,
     "body_too_large", "1024"),
    (["-H", "Content-Type: application/json", "-H", "Transfer-Encoding: chunked", "-d",
      '{"text": "' + "a" * 2000 + '"}'], 413, "body_too_large", "1024"),
])
def test_bad_requests_get_the_error_shape(service: Running, args: list[str], status: int,
                                          code: str, needle: str) -> None:
    got, headers, body = curl("-X", "POST", *args, service.url + "/notes")
    assert got == status, body
    assert headers["content-type"].startswith("application/json")
    error = json.loads(body)["error"]
    assert error["code"] == code and needle in error["message"]
    assert httpx.get(service.url + "/health").status_code == 200


def test_unknown_paths_methods_and_crashes(service: Running) -> None:
    r = httpx.get(service.url + "/nope")
    assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found")
    r = httpx.delete(service.url + "/notes")
    assert (r.status_code, r.json()["error"]["code"]) == (405, "method_not_allowed")
    r = httpx.get(service.url + "/boom")
    assert r.status_code == 500
    assert "internal detail" not in r.text and r.json()["error"]["request_id"]


def test_ready_names_both_hashes_when_the_chain_is_another(tmp_path: Path,
                                                           devnode: DevNode) -> None:
    other = "0x" + "ab" * 32
    with sample_service(tmp_path, rpc_url=devnode.ws, genesis_hash=other) as running:
        r = httpx.get(running.url + "/ready")
    assert r.status_code == 503 and r.headers["retry-after"] == "5"
    message = r.json()["error"]["message"]
    assert other in message and devnode.substrate().get_block_hash(0) in message


def test_ready_fails_while_the_chain_is_down(tmp_path: Path) -> None:
    with sample_service(tmp_path, rpc_url=f"ws://127.0.0.1:{free_port()}") as running:
        r = httpx.get(running.url + "/ready")
        assert r.status_code == 503
        checks = {c["name"]: c["ok"] for c in r.json()["error"]["checks"]}
        assert checks == {"database": True, "chain": False}
        assert httpx.get(running.url + "/health").status_code == 200


def test_sigterm_finishes_requests_in_flight(tmp_path: Path) -> None:
    with sample_service(tmp_path, rpc_url=f"ws://127.0.0.1:{free_port()}") as running:
        result: dict[str, object] = {}

        def slow() -> None:
            result["response"] = httpx.post(running.url + "/slow", json={}, timeout=30)

        t = threading.Thread(target=slow)
        t.start()
        time.sleep(0.5)
        running.proc.send_signal(signal.SIGTERM)
        t.join()
        # uvicorn finishes the requests, then re-raises the signal it caught (as systemd and
        # supervisord expect of a process told to stop).
        assert running.proc.wait(timeout=20) in (0, -signal.SIGTERM)
    response = result["response"]
    assert isinstance(response, httpx.Response)
    assert response.status_code == 200 and response.json() == {"done": True}


def test_secret_stays_out_of_argv_logs_and_errors(service: Running) -> None:
    httpx.post(service.url + "/notes", json={"text": "x"})
    cmdline = Path(f"/proc/{service.proc.pid}/cmdline").read_bytes()
    assert TOKEN.encode() not in cmdline
    time.sleep(0.2)
    assert TOKEN not in service.log.read_text()


def run_main(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tests.services.common.sample.app", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})}, check=False)


def test_bad_configuration_stops_with_one_line(tmp_path: Path) -> None:
    cfg = _config(tmp_path, 0)
    done = run_main("--config", str(cfg))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: config {cfg}: listen_port: 0: Input should be greater than or equal to 1"]
    token = tmp_path / "token"
    token.write_text(TOKEN)
    os.chmod(token, 0o644)
    cfg = _config(tmp_path, free_port(), token_file=str(token))
    done = run_main("--config", str(cfg))
    assert done.returncode == 2 and "chmod 600" in done.stderr and TOKEN not in done.stderr
    done = run_main("--config", str(cfg), "--check-config",
                    env={"NET_SAMPLE_LISTEN_PORT": "99999"})
    assert done.returncode == 2 and "environment NET_SAMPLE_LISTEN_PORT" in done.stderr

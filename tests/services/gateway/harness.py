"""Real processes for the gateway suites: a development node with short epochs, ``net-gateway``,
``net-worker`` (with the built-in TEST ENGINE, or in front of ``net-test-engine``), all on free
loopback ports, each stopped by its PID."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from substrateinterface import Keypair, SubstrateInterface

from tests.conftest import free_port
from tests.support.devnode import DevNode, plain_spec, raw_spec

BIN = Path(sys.executable).parent
SLOT_MS = 500
EPOCH_BLOCKS = 6  # 3 s epochs: staleness shows within seconds
WORKER_SECRET = "test-worker-secret-0123456789"


def wait_for(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except Exception as exc:
            last = exc
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}; last: {last!r}")


def secret_file(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


@dataclass
class Proc:
    args: list[str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Proc:
        with self.log.open("ab") as fh:
            self.proc = subprocess.Popen(self.args, stdout=fh, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.kill(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.kill(signal.SIGKILL)
            self.proc.wait(timeout=5)


def start_chain(root: Path) -> DevNode:
    plain = plain_spec(root / "plain.json", chain_id="gw_net", slot_ms=SLOT_MS,
                       epoch_length=EPOCH_BLOCKS)
    node = DevNode(root / "node", str(raw_spec(plain)), name="gw").start()
    wait_for(lambda: node.best() >= 1, 60, "the first block")
    return node


def current_epoch(node: DevNode) -> int:
    substrate = SubstrateInterface(url=node.http, ss58_format=42)
    try:
        return int(substrate.query("OperatorStake", "CurrentEpoch").value)
    finally:
        substrate.close()


def free_balance(node: DevNode, address: str) -> int:
    substrate = SubstrateInterface(url=node.http, ss58_format=42)
    try:
        return int(substrate.query("System", "Account", [address]).value["data"]["free"])
    finally:
        substrate.close()


def transfer(node: DevNode, source: str, dest: str, value: int) -> None:
    substrate = SubstrateInterface(url=node.ws, ss58_format=42)
    try:
        call = substrate.compose_call("Balances", "transfer_keep_alive",
                                      {"dest": dest, "value": value})
        xt = substrate.create_signed_extrinsic(
            call=call, keypair=Keypair.create_from_uri(source, ss58_format=42))
        assert substrate.submit_extrinsic(xt, wait_for_inclusion=True).is_success
    finally:
        substrate.close()


def register(node: DevNode, uri: str, stake: int) -> None:
    substrate = SubstrateInterface(url=node.ws, ss58_format=42)
    try:
        call = substrate.compose_call("OperatorStake", "register",
                                      {"stake": stake, "attestation_hash": "0x" + "00" * 32})
        xt = substrate.create_signed_extrinsic(
            call=call, keypair=Keypair.create_from_uri(uri, ss58_format=42))
        receipt = substrate.submit_extrinsic(xt, wait_for_inclusion=True)
        assert receipt.is_success, receipt.error_message
    finally:
        substrate.close()


@dataclass
class Gateway:
    url: str
    config: Path
    proc: Proc

    def get(self, path: str, key: str | None = None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.get(self.url + path, headers=headers, timeout=10)

    def workers(self) -> dict[str, Any]:
        return self.get("/v1/workers").json()


def start_gateway(root: Path, node: DevNode, database_url: str, *, name: str = "gateway",
                  settle: bool = True, extra: dict[str, Any] | None = None) -> Gateway:
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config: dict[str, Any] = {
        "listen_port": port, "database_url": database_url, "rpc_url": node.ws,
        "state_dir": str(root / "state"),
        "worker_secret_file": str(secret_file(root / "worker.secret", WORKER_SECRET)),
        # The suites' workers and attackers all listen on loopback.
        "allow_private_endpoints": True,
        # Workers re-announce every 2 s here; a forgotten one expires within the test.
        "worker_ttl_s": 15.0,
        "chain_poll_s": 0.3, "registry_refresh_s": 0.3, "health_interval_s": 0.5,
        "settle_interval_s": 1.0, "cooldown_s": 2.0, "log_level": "warning",
        "prices": {"net-test-chat": {"input_per_1k": 1_000_000, "output_per_1k": 2_000_000}},
        **(extra or {}),
    }
    if settle:
        config["settlement_seed_file"] = str(secret_file(root / "settle.secret", "//Ferdie"))
    path = root / f"{name}.yml"
    path.write_text(yaml.safe_dump(config))
    proc = Proc([str(BIN / "net-gateway"), "--config", str(path)], root / f"{name}.log").start()
    gw = Gateway(f"http://127.0.0.1:{port}", path, proc)
    try:
        wait_for(lambda: gw.get("/v1/workers").status_code == 200, 60, f"{name} to answer")
    except AssertionError:
        proc.stop()
        raise AssertionError(f"{name} did not start:\n{proc.tail()}") from None
    return gw


@dataclass
class WorkerProc:
    url: str
    operator: str
    proc: Proc
    config: dict[str, Any] = field(default_factory=dict)


def start_worker(root: Path, node: DevNode, gateway_url: str, *, name: str,
                 dev_uri: str | None = None, keystore: Path | None = None,
                 account: str | None = None, passphrase: str | None = None,
                 register_stake: int | None = None, engine_url: str = "test",
                 extra: dict[str, Any] | None = None) -> WorkerProc:
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config: dict[str, Any] = {
        "listen_port": port, "gateway_url": gateway_url, "rpc_url": node.ws,
        "engine_url": engine_url, "capacity": 64, "tick_s": 0.3, "announce_interval_s": 2.0,
        **(extra or {}),
    }
    if register_stake is not None:
        config["register_stake"] = register_stake
    if dev_uri is not None:
        config["dev_suri_file"] = str(secret_file(root / f"{name}.suri", dev_uri))
        operator = Keypair.create_from_uri(dev_uri, ss58_format=42).ss58_address
    else:
        assert keystore is not None and account is not None and passphrase is not None
        config.update(keystore_dir=str(keystore), account=account,
                      passphrase_file=str(secret_file(root / f"{name}.pass", passphrase)))
        doc = json.loads((keystore / f"{account}.sr25519.json").read_text())
        operator = doc["address"]
    path = root / f"{name}.yml"
    path.write_text(yaml.safe_dump(config))
    proc = Proc([str(BIN / "net-worker"), "--config", str(path), "--log-level", "warning"],
                root / f"{name}.log").start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: httpx.get(url + "/health", timeout=2).status_code == 200, 60,
                 f"worker {name}")
    except AssertionError:
        proc.stop()
        raise AssertionError(f"worker {name} did not start:\n{proc.tail()}") from None
    return WorkerProc(url, operator, proc, config)


def live_models(gw: Gateway) -> dict[str, int]:
    return gw.workers()["live_workers_per_model"]


def start_nginx(root: Path, upstreams: list[str]) -> tuple[str, Proc]:
    """nginx on a free loopback port, round-robin over ``upstreams`` (two gateway instances)."""
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    servers = "\n".join(f"    server {u.removeprefix('http://')};" for u in upstreams)
    conf = root / "nginx.conf"
    conf.write_text(f"""
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {root}/body;
  proxy_temp_path {root}/proxy;
  fastcgi_temp_path {root}/fastcgi;
  uwsgi_temp_path {root}/uwsgi;
  scgi_temp_path {root}/scgi;
  upstream gateways {{
{servers}
    keepalive 64;
  }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://gateways;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }}
  }}
}}
""")
    proc = Proc(["/usr/sbin/nginx", "-c", str(conf), "-p", str(root), "-g", "daemon off;"],
                root / "nginx.log").start()
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: httpx.get(url + "/v1/workers", timeout=2).status_code == 200, 30, "nginx")
    return url, proc


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class LoopbackServer:
    """A real HTTP server on a free loopback port, in a thread, that records every request it
    gets: an attacker's endpoint. ``answer(seen)`` gives (status, JSON body); the default
    answers /health and any POST with 200."""

    def __init__(self, answer: Callable[[Seen], tuple[int, Any]] | None = None) -> None:
        import http.server
        import threading

        self.seen: list[Seen] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                seen = Seen(self.command, self.path, {k.lower(): v for k, v in
                                                      self.headers.items()},
                            self.rfile.read(length) if length else b"")
                outer.seen.append(seen)
                status, body = (answer or _default_answer)(seen)
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = _handle

            def log_message(self, *args: Any) -> None:
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def _default_answer(seen: Seen) -> tuple[int, Any]:
    if seen.method == "GET":
        return 200, {"status": "ok"}
    return 200, {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                 "choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": "ok"}}],
                 "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

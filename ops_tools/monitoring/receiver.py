"""The local network's webhook receiver: Alertmanager posts each notification here and it is
appended to a file as one JSON line (``net-alert-receiver``; on a real network the inventory
points Alertmanager at Matrix, Slack or any webhook instead).

Only loopback reaches it, but the body is still bounded and must be a JSON object."""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MAX_BODY_BYTES = 1024 * 1024


def make_server(host: str, port: int, out: Path) -> ThreadingHTTPServer:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, text: str) -> None:
            body = (text + "\n").encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/ready":
                self._answer(200, "ready")
            else:
                self._answer(404, "not found")

        def do_POST(self) -> None:
            try:
                length = int(self.headers.get("Content-Length") or "-1")
            except ValueError:
                length = -1
            if length < 0 or length > MAX_BODY_BYTES:
                self._answer(413, f"a body of 0..{MAX_BODY_BYTES} bytes with Content-Length")
                return
            try:
                payload = json.loads(self.rfile.read(length))
            except ValueError:
                self._answer(400, "the body is not JSON")
                return
            if not isinstance(payload, dict):
                self._answer(400, "the body is not a JSON object")
                return
            line = json.dumps({"received": time.time(), "path": self.path[:200],
                               "payload": payload}, sort_keys=True) + "\n"
            with lock:
                # One write per delivery on an O_APPEND descriptor: a reader never sees half.
                fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
                try:
                    os.write(fd, line.encode())
                finally:
                    os.close(fd)
            self._answer(200, "ok")

        def log_message(self, format: str, *args: object) -> None:
            pass

    return ThreadingHTTPServer((host, port), Handler)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="net-alert-receiver",
        description="Append each Alertmanager webhook delivery to a file (one JSON line).")
    parser.add_argument("--listen-host", default="127.0.0.1")
    parser.add_argument("--listen-port", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True, help="the deliveries file")
    args = parser.parse_args(argv)
    server = make_server(args.listen_host, args.listen_port, args.out)
    try:
        server.serve_forever()
    finally:
        server.server_close()


def read_deliveries(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

"""The local network's webhook receiver: deliveries appended as JSON lines; what is not a bounded
JSON object is refused (performing each attack against the running server)."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ops_tools.monitoring.receiver import MAX_BODY_BYTES, make_server, read_deliveries


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    out = tmp_path / "deliveries.jsonl"
    server = make_server("127.0.0.1", 0, out)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], out
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def post(port: int, body: bytes, headers: dict[str, str] | None = None) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("POST", "/alerts", body=body, headers=headers or {})
        return conn.getresponse().status
    finally:
        conn.close()


def post_oversized(port: int, size: int) -> int:
    """Announces ``size`` bytes and reads the answer before sending them, as a server that
    refuses on the header alone answers: sending first would race its close (a broken pipe)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(f"POST /alerts HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     f"Content-Length: {size}\r\n\r\n".encode())
        status_line = sock.makefile("rb").readline()
        with contextlib.suppress(OSError):  # refused and closed: what the test expects
            sock.sendall(b"x" * size)
    return int(status_line.split()[1])


def test_a_delivery_is_appended(receiver) -> None:
    port, out = receiver
    payload = {"status": "firing", "alerts": [{"status": "firing",
                                               "labels": {"alertname": "FinalityStalled"}}]}
    assert post(port, json.dumps(payload).encode()) == 200
    assert post(port, json.dumps({**payload, "status": "resolved"}).encode()) == 200
    got = read_deliveries(out)
    assert [d["payload"]["status"] for d in got] == ["firing", "resolved"]
    assert got[0]["payload"]["alerts"][0]["labels"]["alertname"] == "FinalityStalled"


def test_oversized_non_json_and_non_object_bodies_are_refused(receiver) -> None:
    port, out = receiver
    assert post_oversized(port, MAX_BODY_BYTES + 1) == 413
    assert post(port, b"{not json") == 400
    assert post(port, b"[1, 2]") == 400
    # A lying Content-Length is refused before anything is read.
    assert post(port, b"{}", {"Content-Length": str(MAX_BODY_BYTES * 10)}) == 413
    assert read_deliveries(out) == []

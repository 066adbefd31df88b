"""The docs role's readiness probe (plugins/modules/net_docs_release.py) against a TLS server
on loopback that, like the edge's default server (ssl_reject_handshake), refuses a handshake
without a name it serves: the probe names the site in SNI and Host while connecting to the
address of its URL."""

from __future__ import annotations

import importlib.util
import json
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

NAME = "docs.testnet.invalid"
GENESIS = "0x" + "ab" * 32


def _probe() -> ModuleType:
    path = ROOT / "plugins" / "modules" / "net_docs_release.py"
    spec = importlib.util.spec_from_file_location("net_docs_release", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"genesis_hash": GENESIS, "host": self.headers["Host"],
                           "path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[int, list[str | None]]]:
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", f"/CN={NAME}",
                    "-addext", f"subjectAltName=DNS:{NAME}", "-keyout", str(tmp_path / "k.pem"),
                    "-out", str(tmp_path / "c.pem")], check=True, capture_output=True)
    names: list[str | None] = []

    def sni(sock: ssl.SSLObject, name: str | None, ctx: ssl.SSLContext) -> int | None:
        names.append(name)
        return None if name == NAME else ssl.ALERT_DESCRIPTION_UNRECOGNIZED_NAME

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "c.pem", tmp_path / "k.pem")
    context.sni_callback = sni
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], names
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_names_the_site_in_sni_and_host(site: tuple[int, list[str | None]]) -> None:
    port, names = site
    status, body = _probe().fetch(f"https://127.0.0.1:{port}/releases/current/release.json",
                                  NAME, 5)
    answer = json.loads(body)
    assert status == 200
    assert names == [NAME]
    assert answer["host"].split(":")[0] == NAME
    assert answer["path"] == "/releases/current/release.json"
    assert answer["genesis_hash"] == GENESIS


def test_without_a_name_the_handshake_is_refused(site: tuple[int, list[str | None]]) -> None:
    """What a bare https://127.0.0.1 request (Ansible's uri) gets from such a server."""
    port, names = site
    with pytest.raises(OSError):
        _probe().fetch(f"https://127.0.0.1:{port}/releases/current/release.json", "", 5)
    assert names == [None]

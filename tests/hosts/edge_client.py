"""Clients of the edge (roles/edge) as the public reaches it, which verify its certificate
against a test CA alone (tests/hosts/tls.py): they connect to a host's address and ask for the
public name (SNI and Host), as a resolver would have sent them there.

Used by roles/edge/molecule/systemd (verify.yml runs `python -m tests.hosts.edge_client NAME
ADDRESS CA`, which prints the WebSocket check as JSON) and tests/hosts/test_testnet_shape.py."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import ssl
import sys
from typing import Any

from websockets.asyncio.client import connect


class _Pinned(http.client.HTTPSConnection):
    """HTTPS to ``address`` for the host name the connection was made for."""

    def __init__(self, name: str, address: str, ctx: ssl.SSLContext, timeout: float) -> None:
        super().__init__(name, 443, context=ctx, timeout=timeout)
        self._address = address
        self._ctx = ctx

    def connect(self) -> None:
        sock = socket.create_connection((self._address, 443), self.timeout)
        self.sock = self._ctx.wrap_socket(sock, server_hostname=self.host)


def https(name: str, address: str, ca: str, path: str = "/", body: Any = None,
          timeout: float = 10) -> tuple[int, Any]:
    """GET ``path`` (POST of ``body`` as JSON when given) on https://<name>; the status and the
    answer (decoded JSON when it is JSON)."""
    conn = _Pinned(name, address, ssl.create_default_context(cafile=ca), timeout)
    try:
        data = None if body is None else json.dumps(body).encode()
        conn.request("GET" if body is None else "POST", path, data,
                     {"Content-Type": "application/json"} if body is not None else {})
        resp = conn.getresponse()
        raw = resp.read()
    finally:
        conn.close()
    try:
        return resp.status, json.loads(raw)
    except ValueError:
        return resp.status, raw.decode(errors="replace")


def rpc(name: str, address: str, ca: str, method: str, params: list[Any] | None = None,
        ) -> dict[str, Any]:
    """A JSON-RPC call over HTTPS; the whole answer (result or error)."""
    _, answer = https(name, address, ca, "/", {"jsonrpc": "2.0", "id": 1, "method": method,
                                               "params": params or []})
    return answer


async def _wss(name: str, address: str, ca: str) -> dict[str, object]:
    ctx = ssl.create_default_context(cafile=ca)
    async with connect(f"wss://{name}/", host=address, port=443, ssl=ctx,
                       server_hostname=name, open_timeout=10) as ws:
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "chain_subscribeNewHeads",
                                  "params": []}))
        sub = json.loads(await asyncio.wait_for(ws.recv(), 10))["result"]
        heads: list[int] = []
        while len(heads) < 2:
            msg = json.loads(await asyncio.wait_for(ws.recv(), 30))
            if msg.get("params", {}).get("subscription") == sub:
                heads.append(int(msg["params"]["result"]["number"], 16))
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "author_rotateKeys",
                                  "params": []}))
        while True:
            unsafe = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if unsafe.get("id") == 2:
                break
        return {"heads": heads, "unsafe": unsafe}


def wss_check(name: str, address: str, ca: str) -> dict[str, object]:
    """Subscribes to new heads over wss://<name>/ and asks for an unsafe method on the same
    socket: the heads seen and the unsafe call's answer."""
    return asyncio.run(_wss(name, address, ca))


if __name__ == "__main__":
    print(json.dumps(wss_check(*sys.argv[1:4])))

#!/usr/bin/python
"""Ask the docs host's own nginx which release its site serves (/releases/current/release.json).

Under systemd the site shares the system's nginx with the edge (services-0), whose default server
on 443 refuses a handshake without a name it serves (ssl_reject_handshake). A request to
https://127.0.0.1 sends no SNI, so it must name the site in the handshake as well as in Host;
Ansible's uri module cannot connect to one address while naming another host."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from typing import Any
from urllib.parse import urlsplit

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: net_docs_release
short_description: Read the release a docs site serves, from the docs host itself
author: NET ops suite
description:
  - >-
    GET I(url) (the site's readiness document) from the address in the URL, naming
    I(server_name) in TLS (SNI) and in Host. The certificate is not verified (it is the public
    name's; this asks the content). Never changes anything; never fails on an answer: I(status)
    is -1 when nothing answered.
options:
  url: {description: "http(s)://address:port/path", type: str, required: true}
  server_name: {description: "name for SNI and Host; empty: the URL's host", type: str, default: ""}
  timeout: {description: seconds per request, type: float, default: 5}
"""

RETURN = r"""
status: {description: HTTP status, -1 without an answer, type: int, returned: always}
json: {description: the document, when it is JSON, type: dict, returned: always}
genesis_hash: {description: its genesis_hash, empty when none, type: str, returned: always}
msg: {description: why there is no answer, type: str, returned: when status is -1}
"""


class _NamedHTTPSConnection(http.client.HTTPSConnection):
    """Connects to one address and names another host in SNI (Host follows self.host)."""

    def __init__(self, address: str, port: int, server_name: str, timeout: float) -> None:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        super().__init__(server_name, port, timeout=timeout, context=context)
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


def fetch(url: str, server_name: str, timeout: float) -> tuple[int, bytes]:
    parts = urlsplit(url)
    address = parts.hostname or "127.0.0.1"
    name = server_name or address
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        conn = _NamedHTTPSConnection(address, parts.port or 443, name, timeout)
    else:
        conn = http.client.HTTPConnection(address, parts.port or 80, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Host": name, "Cache-Control": "no-cache"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "server_name": {"type": "str", "default": ""},
            "timeout": {"type": "float", "default": 5},
        },
        supports_check_mode=True,
    )
    result: dict[str, Any] = {"changed": False, "status": -1, "json": {}, "genesis_hash": ""}
    try:
        status, body = fetch(module.params["url"], module.params["server_name"],
                             module.params["timeout"])
    except (OSError, http.client.HTTPException) as exc:
        module.exit_json(msg=f"{module.params['url']}: {exc}", **result)
    result["status"] = status
    try:
        document = json.loads(body)
    except ValueError:
        document = None
    if isinstance(document, dict):
        result["json"] = document
        genesis = document.get("genesis_hash")
        result["genesis_hash"] = genesis if isinstance(genesis, str) else ""
    module.exit_json(**result)


if __name__ == "__main__":
    main()

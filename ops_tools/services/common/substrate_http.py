"""substrate-interface over HTTP with a timeout on every call.

Its HTTP transport gives ``requests`` no timeout, so a node that accepts and never answers
would hold the calling thread (and whatever lock it holds) for as long as the node hangs.
"""

from __future__ import annotations

from typing import Any

import requests
from substrateinterface import SubstrateInterface

from ops_tools.chain.rpc import http_url


class _TimedSession(requests.Session):
    def __init__(self, timeout_s: float) -> None:
        super().__init__()
        self.timeout_s = timeout_s

    def request(self, *args: Any, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        kwargs.setdefault("timeout", (self.timeout_s, self.timeout_s))
        return super().request(*args, **kwargs)


def connect(rpc_url: str, timeout_s: float) -> SubstrateInterface:
    """substrate-interface over HTTP, every call bounded by ``timeout_s`` (connect and read)."""
    substrate = SubstrateInterface(url=http_url(rpc_url), ss58_format=42)
    substrate.transport.session = _TimedSession(timeout_s)
    return substrate

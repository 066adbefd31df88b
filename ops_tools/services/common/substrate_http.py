"""substrate-interface over HTTP with a timeout on every call.

Its HTTP transport gives ``requests`` no timeout, so a node that accepts and never answers
would hold the calling thread (and whatever lock it holds) for as long as the node hangs:
tests/services/test_hung_node.py shows an explorer page held that way.
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


class _TimedInterface(SubstrateInterface):
    """Its constructor already asks the node (``system_chain``, to pick a type registry): the
    timed session must be in place before that call, not after the constructor returns."""

    def __init__(self, url: str, timeout_s: float) -> None:
        self._timeout_s = timeout_s
        super().__init__(url=url, ss58_format=42)

    def reload_type_registry(self, *args: Any, **kwargs: Any) -> None:
        if not isinstance(self.transport.session, _TimedSession):
            self.transport.session = _TimedSession(self._timeout_s)
        super().reload_type_registry(*args, **kwargs)


def connect(rpc_url: str, timeout_s: float) -> SubstrateInterface:
    """substrate-interface over HTTP, every call bounded by ``timeout_s`` (connect and read),
    the constructor's own included."""
    return _TimedInterface(http_url(rpc_url), timeout_s)

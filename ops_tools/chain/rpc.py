"""A minimal synchronous JSON-RPC 2.0 client over HTTP."""

from __future__ import annotations

import itertools
import json
import urllib.error
import urllib.request
from typing import Any

from ops_tools.errors import OpsError


class RpcError(OpsError):
    """The node could not be reached, or answered with a JSON-RPC error."""


def http_url(url: str) -> str:
    """``ws://h:p`` -> ``http://h:p``: Substrate nodes answer both on one port."""
    if url.startswith("ws://"):
        return "http://" + url[len("ws://") :]
    if url.startswith("wss://"):
        return "https://" + url[len("wss://") :]
    return url


class RpcClient:
    def __init__(self, url: str, timeout: float = 5.0) -> None:
        self.url = http_url(url)
        self.timeout = timeout
        self._ids = itertools.count(1)

    def call(self, method: str, params: list[Any] | None = None) -> Any:
        body = json.dumps(
            {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params or []}
        ).encode()
        request = urllib.request.Request(  # noqa: S310 - http(s) only, from http_url
            self.url, data=body, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as resp:  # noqa: S310
                reply = json.load(resp)
        except urllib.error.HTTPError as exc:
            raise RpcError(f"{self.url}: {method} answered HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RpcError(f"{self.url}: cannot reach the node ({reason})") from None
        except json.JSONDecodeError:
            raise RpcError(f"{self.url}: {method} answered something that is not JSON") from None
        if "error" in reply:
            err = reply["error"]
            raise RpcError(f"{self.url}: {method} failed: {err.get('message')} ({err.get('code')})")
        return reply.get("result")

    def genesis_hash(self) -> str:
        return str(self.call("chain_getBlockHash", [0]))

    def best_number(self) -> int:
        return int(self.call("chain_getHeader")["number"], 16)

    def finalized_number(self) -> int:
        head = self.call("chain_getFinalizedHead")
        return int(self.call("chain_getHeader", [head])["number"], 16)

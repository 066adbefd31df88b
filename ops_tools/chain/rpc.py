"""A minimal synchronous JSON-RPC 2.0 client over HTTP: every call bounded in time and in the
size of the answer it reads (a hostile or broken endpoint can neither hold nor flood the caller)."""

from __future__ import annotations

import itertools
import json
import urllib.error
import urllib.request
from typing import Any

from ops_tools.chain.urls import http_url
from ops_tools.errors import OpsError

# Larger than any answer the suite asks for (a block with its extrinsics, a page of keys).
MAX_RESPONSE_BYTES = 16 * 1024 * 1024


class RpcError(OpsError):
    """The node could not be reached, or answered with a JSON-RPC error."""



class RpcClient:
    def __init__(self, url: str, timeout: float = 5.0,
                 max_bytes: int = MAX_RESPONSE_BYTES) -> None:
        self.url = http_url(url)
        self.timeout = timeout
        self.max_bytes = max_bytes
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
                raw = resp.read(self.max_bytes + 1)
        except urllib.error.HTTPError as exc:
            raise RpcError(f"{self.url}: {method} answered HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RpcError(f"{self.url}: cannot reach the node ({reason})") from None
        if len(raw) > self.max_bytes:
            raise RpcError(f"{self.url}: {method} answered more than {self.max_bytes} bytes;"
                           " refused (is this a node's RPC endpoint?)")
        try:
            reply = json.loads(raw)
        except ValueError:
            raise RpcError(f"{self.url}: {method} answered something that is not JSON") from None
        if not isinstance(reply, dict):
            raise RpcError(f"{self.url}: {method} answered JSON that is not a JSON-RPC reply")
        if "error" in reply:
            err = reply["error"] if isinstance(reply["error"], dict) else {}
            raise RpcError(f"{self.url}: {method} failed: {err.get('message')} ({err.get('code')})")
        return reply.get("result")

    def genesis_hash(self) -> str:
        return str(self.call("chain_getBlockHash", [0]))

    def best_number(self) -> int:
        return int(self.call("chain_getHeader")["number"], 16)

    def finalized_number(self) -> int:
        head = self.call("chain_getFinalizedHead")
        return int(self.call("chain_getHeader", [head])["number"], 16)

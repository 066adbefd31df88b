"""Minimal Substrate JSON-RPC over HTTP for modules that run on the node's host (stdlib only,
since a remote host has no ops_tools)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


class RpcError(Exception):
    """The node did not answer, or answered with an error; the message says which."""


def call(url: str, method: str, params: list[Any] | None = None, timeout: float = 3.0) -> Any:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []})
    req = urllib.request.Request(  # noqa: S310 - the URL is the node's own loopback endpoint
        url, data=body.encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310
            reply = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        raise RpcError(f"{method}: HTTP {exc.code} from {url}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise RpcError(f"{method}: no answer from {url} ({reason})") from None
    except ValueError as exc:
        raise RpcError(f"{method}: {url} answered with something not JSON ({exc})") from None
    if not isinstance(reply, dict):
        raise RpcError(f"{method}: {url} answered with a non-object")
    if "error" in reply:
        raise RpcError(f"{method}: error from {url}: {reply['error']}")
    return reply.get("result")


def block_number(header: Any) -> int | None:
    """A header's number (hex string in Substrate's JSON) as an int."""
    if not isinstance(header, dict) or not isinstance(header.get("number"), str):
        return None
    try:
        return int(header["number"], 16)
    except ValueError:
        return None

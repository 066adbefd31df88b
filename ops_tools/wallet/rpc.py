"""The chain endpoint: which URL, connecting to it, and turning transport failures into one line.

Resolution: ``--rpc-url`` > ``$NET_RPC_URL`` > ``ws://127.0.0.1:9944``. ws:// and wss:// do
everything; http(s):// answers queries but cannot watch an extrinsic into a block, so the
submitting commands require a WebSocket URL.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping
from urllib.parse import urlsplit

from substrateinterface import SubstrateInterface
from websocket import WebSocketException, WebSocketTimeoutException

from ops_tools.chain import substrate as chain_substrate
from ops_tools.chain.urls import is_websocket
from ops_tools.errors import InputError, OpsError
from ops_tools.wallet.errors import RpcUnreachableError

DEFAULT_RPC_URL = "ws://127.0.0.1:9944"
RPC_ENV = "NET_RPC_URL"
DEFAULT_TIMEOUT_S = 60.0
_SCHEMES = ("ws", "wss", "http", "https")


def resolve_rpc_url(flag: str | None, env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    if flag:
        url, source = flag, "--rpc-url"
    elif env.get(RPC_ENV):
        url, source = env[RPC_ENV], RPC_ENV
    else:
        url, source = DEFAULT_RPC_URL, "default"
    parts = urlsplit(url)
    if parts.scheme not in _SCHEMES or not parts.hostname:
        raise InputError(
            f"{source}: {url!r} is not a node RPC URL; use ws://HOST:PORT, wss://HOST,"
            " http://HOST:PORT or https://HOST"
        )
    try:
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError as exc:
        raise InputError(f"{source}: {url!r} has an invalid port; use ws://HOST:PORT") from exc
    return url


def require_websocket(url: str) -> None:
    if not is_websocket(url):
        raise InputError(
            f"--rpc-url: {url!r} is HTTP; submitting and waiting for inclusion needs a WebSocket"
            " endpoint, use the ws:// or wss:// URL of the node"
        )


@contextlib.contextmanager
def rpc_errors(url: str, timeout: float) -> Iterator[None]:
    """Transport failures become one line naming the URL; chain-level errors pass through."""
    try:
        yield
    except WebSocketTimeoutException as exc:
        raise RpcUnreachableError(
            f"RPC {url}: no answer within {timeout:g} s; check that the node is up and synced,"
            " or raise --timeout"
        ) from exc
    except (OSError, WebSocketException) as exc:  # refused, DNS, reset, not a WebSocket, HTTP down
        reason = _short_reason(exc)
        raise RpcUnreachableError(
            f"RPC {url} unreachable ({reason}); start the node or point --rpc-url / {RPC_ENV}"
            " at a running one"
        ) from exc


def _short_reason(exc: BaseException) -> str:
    """requests nests the socket error three levels deep; the errno line is what matters."""
    text = str(exc) or type(exc).__name__
    errno_part = re.search(r"\[Errno -?\d+\] [^\"')]+", text)
    return errno_part.group(0).strip() if errno_part else text


def connect(url: str, timeout: float = DEFAULT_TIMEOUT_S) -> SubstrateInterface:
    with rpc_errors(url, timeout):
        try:
            # A dropped connection mid-submit must fail loudly, not re-send on a new socket.
            substrate = chain_substrate.connect(url, timeout, reconnect=False)
            substrate.init_runtime()
        except (OSError, WebSocketException):
            raise
        except Exception as exc:  # answered, but not like a Substrate node
            raise OpsError(
                f"RPC {url} answered but is not a usable Substrate node ({exc}); check the URL"
            ) from exc
    return substrate

"""A node's RPC URL in the scheme a client needs: Substrate nodes answer HTTP and WebSocket on
one port, so ``ws://h:p`` and ``http://h:p`` name the same endpoint."""

from __future__ import annotations

from urllib.parse import urlsplit

_TO_HTTP = {"ws": "http", "wss": "https"}
_TO_WS = {"http": "ws", "https": "wss"}


def _swap(url: str, table: dict[str, str]) -> str:
    scheme, sep, rest = url.partition("://")
    return f"{table[scheme]}{sep}{rest}" if sep and scheme in table else url


def http_url(url: str) -> str:
    """``ws://h:p`` -> ``http://h:p``, ``wss://h`` -> ``https://h``; others unchanged."""
    return _swap(url, _TO_HTTP)


def ws_url(url: str) -> str:
    """``http://h:p`` -> ``ws://h:p``, ``https://h`` -> ``wss://h``; others unchanged."""
    return _swap(url, _TO_WS)


def is_websocket(url: str) -> bool:
    return urlsplit(url).scheme in ("ws", "wss")

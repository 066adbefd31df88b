"""The one way the suite opens a ``SubstrateInterface``: every call bounded by a timeout, and
the runtime metadata fetched and decoded once per process for each runtime of each network.

substrate-interface sets no timeout on its HTTP transport, and fetching plus decoding metadata is
most of the cost of a new connection (a client that reconnects after every failure, or one per
settlement, paid it each time). Its ``cache_region`` hook (a dogpile region) is keyed by the
runtime's spec version only; here each network (genesis hash) has its own region, so a reset
that keeps the spec version never decodes with the old network's metadata.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, TypeVar

import requests
from substrateinterface import SubstrateInterface

from ops_tools.chain.keys import SS58_FORMAT
from ops_tools.chain.scale import ScaleConfig
from ops_tools.chain.urls import is_websocket

S = TypeVar("S", bound=SubstrateInterface)

# Networks kept per process; each holds one decoded metadata per runtime it ran.
_NETWORKS_KEPT = 4


class _TimedSession(requests.Session):
    """A ``requests`` session that always has a (connect, read) timeout."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__()
        self.timeout_s = timeout_s

    def request(self, *args: Any, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        kwargs.setdefault("timeout", (self.timeout_s, self.timeout_s))
        return super().request(*args, **kwargs)


class _MetadataRegion:
    """The part of a dogpile region substrate-interface uses (``get``: falsy when absent,
    ``set``), for one network."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}

    def get(self, key: str) -> Any:
        return self._values.get(key)

    def set(self, key: str, value: Any) -> None:
        self._values[key] = value


_regions: OrderedDict[str, _MetadataRegion] = OrderedDict()
_regions_lock = threading.Lock()


def _region(genesis_hash: str) -> _MetadataRegion:
    with _regions_lock:
        region = _regions.pop(genesis_hash, None) or _MetadataRegion()
        _regions[genesis_hash] = region
        while len(_regions) > _NETWORKS_KEPT:
            _regions.popitem(last=False)
        return region


def connect(url: str, timeout_s: float, *, ss58_format: int | None = None,
            reconnect: bool = False, cls: type[S] = SubstrateInterface,  # type: ignore[assignment]
            **kwargs: Any) -> S:
    """``cls`` (``SubstrateInterface`` or a subclass) on ``url``. ws:// and wss:// keep one
    socket (its reads bounded by ``timeout_s``); http(s):// has no socket to go stale between
    polls (connect and read bounded by ``timeout_s``). ``reconnect`` False: a dropped socket
    fails the call instead of silently re-sending on a new one (what a submitter needs).
    Addresses are in ``ss58_format``, by default the one the chain declares."""
    given = SS58_FORMAT if ss58_format is None else ss58_format
    # Auto-discovery asks the node for its chain name inside the constructor, before the HTTP
    # session below has its timeout (a node that never answers held the caller forever); the
    # types come from the runtime's own metadata (V14+), so there is nothing to discover.
    kwargs.setdefault("auto_discover", False)
    # Its own configuration, whose objects keep it: clients on other threads cannot swap it.
    kwargs.setdefault("runtime_config", ScaleConfig())
    if is_websocket(url):
        substrate = cls(url=url, ss58_format=given, ws_options={"timeout": timeout_s},
                        auto_reconnect=reconnect, **kwargs)
    else:
        substrate = cls(url=url, ss58_format=given, **kwargs)
        substrate.transport.session = _TimedSession(timeout_s)
    try:
        genesis = substrate.rpc_request("chain_getBlockHash", [0])["result"]
        if ss58_format is None:
            substrate.ss58_format = ss58_prefix(substrate)
    except BaseException:
        substrate.close()
        raise
    substrate.cache_region = _region(str(genesis).lower())
    return substrate


def ss58_prefix(substrate: SubstrateInterface) -> int:
    """The address prefix the chain declares (``system_properties.ss58Format``); the generic
    42 when it declares none."""
    properties = substrate.rpc_request("system_properties", [])["result"] or {}
    value = properties.get("ss58Format")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else SS58_FORMAT

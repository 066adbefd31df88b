"""A readable summary of a chain spec (what ``ops-tools chainspec inspect`` shows)."""

from __future__ import annotations

from typing import Any

from ops_tools.chainspec.genesis import compute_genesis
from ops_tools.chainspec.spec import LoadedSpec


def summarize(spec: LoadedSpec) -> dict[str, Any]:
    data = spec.data
    info = compute_genesis(spec)
    out: dict[str, Any] = {
        "name": data.get("name"),
        "id": data.get("id"),
        "protocolId": data.get("protocolId"),
        "chainType": data.get("chainType"),
        "properties": data.get("properties"),
        "bootNodes": data.get("bootNodes") or [],
        "runtime": info.runtime.to_json() if info.runtime else None,
    }
    out.update(info.to_json())
    return out

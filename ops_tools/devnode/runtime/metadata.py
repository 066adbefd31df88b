"""Metadata V14 generated from the runtime definitions, SCALE-encoded with scalecodec.

V14 rather than V15 because scalecodec 1.2.12 (under substrate-interface 1.8.1) cannot decode
V15. Constant values come from the chain's configuration, read from genesis storage.
"""

from __future__ import annotations

from typing import Any

from ops_tools.devnode.runtime.definitions import (
    PALLETS,
    RUNTIME,
    SIGNED_EXTENSIONS,
    UNCHECKED_EXTRINSIC,
    Pallet,
)
from ops_tools.devnode.runtime.types import Registry

METADATA_MAGIC = b"meta"


def _pallet(p: Pallet, reg: Registry, config: dict[str, Any]) -> dict[str, Any]:
    storage = None
    if p.storage:
        entries = []
        for item in p.storage:
            if item.hasher is None:
                ty: Any = {"Plain": reg.id(item.value)}
            else:
                assert item.key is not None
                ty = {
                    "Map": {
                        "hashers": [item.hasher],
                        "key": reg.id(item.key),
                        "value": reg.id(item.value),
                    }
                }
            entries.append(
                {
                    "name": item.name,
                    "modifier": "Optional" if item.default is None else "Default",
                    "type": ty,
                    "default": "0x" + (item.default or b"\x00").hex(),
                    "documentation": [item.docs] if item.docs else [],
                }
            )
        storage = {"prefix": p.name, "entries": entries}
    return {
        "name": p.name,
        "storage": storage,
        "calls": {"ty": reg.id(p.call_type)} if p.call_type else None,
        "event": {"ty": reg.id(p.event_type)} if p.event_type else None,
        "constants": [
            {
                "name": c.name,
                "type": reg.id(c.type),
                "value": "0x" + c.type.encode(c.value(config)).hex(),
                "documentation": [c.docs] if c.docs else [],
            }
            for c in p.constants
        ],
        "error": {"ty": reg.id(p.error_type)} if p.error_type else None,
        "index": p.index,
    }


def metadata_dict(config: dict[str, Any]) -> dict[str, Any]:
    reg = Registry()
    pallets = [_pallet(p, reg, config) for p in PALLETS]
    extrinsic = {
        "ty": reg.id(UNCHECKED_EXTRINSIC),
        "version": 4,
        "signed_extensions": [
            {"identifier": name, "ty": reg.id(extra), "additional_signed": reg.id(additional)}
            for name, extra, additional in SIGNED_EXTENSIONS
        ],
    }
    runtime_type = reg.id(RUNTIME)
    return {
        "types": {"types": reg.portable()},
        "pallets": pallets,
        "extrinsic": extrinsic,
        "runtime_type": runtime_type,
    }


def encode_metadata(config: dict[str, Any]) -> bytes:
    """``RuntimeMetadataPrefixed``: the ``meta`` magic, then ``RuntimeMetadata::V14``."""
    # scalecodec is imported here only: it is slow to import and only serving nodes need it.
    from scalecodec.base import RuntimeConfiguration
    from scalecodec.type_registry import load_type_registry_preset

    rc = RuntimeConfiguration()
    rc.update_type_registry(load_type_registry_preset("core"))
    obj = rc.create_scale_object("MetadataVersioned")
    data = obj.encode(("0x" + METADATA_MAGIC.hex(), {"V14": metadata_dict(config)}))
    return bytes(data.data)

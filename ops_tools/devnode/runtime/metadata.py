"""Metadata V14 and V15 generated from the runtime definitions, SCALE-encoded with scalecodec.

Both versions come from the same declarations (``definitions``, ``apis``) through the same
pallet and type builders; V15 adds the runtime APIs, the outer enums and pallet docs.
``state_getMetadata`` and ``Metadata_metadata`` serve V14, because scalecodec 1.2.12 (under
substrate-interface 1.8.1) cannot decode V15; ``Metadata_metadata_at_version(15)`` serves V15
to clients that ask for it (@polkadot/api does). Constant values come from the chain's
configuration, read from genesis storage.
"""

from __future__ import annotations

from typing import Any

from ops_tools.devnode.runtime.apis import METADATA_VERSIONS, RUNTIME_APIS
from ops_tools.devnode.runtime.definitions import (
    EXTRA,
    MULTI_ADDRESS,
    MULTI_SIGNATURE,
    PALLETS,
    RUNTIME,
    RUNTIME_CALL,
    RUNTIME_ERROR,
    RUNTIME_EVENT,
    SIGNED_EXTENSIONS,
    UNCHECKED_EXTRINSIC,
    Pallet,
)
from ops_tools.devnode.runtime.types import Registry

METADATA_MAGIC = b"meta"

# scalecodec's registry stops at V14: V15's additions, in its type-definition format, over the
# V14 structures V15 keeps (frame-metadata's v15.rs).
_V15_TYPES: dict[str, Any] = {
    "MetadataV15": {
        "type": "struct",
        "type_mapping": [
            ["types", "PortableRegistry"],
            ["pallets", "Vec<PalletMetadataV15>"],
            ["extrinsic", "ExtrinsicMetadataV15"],
            ["runtime_type", "SiLookupTypeId"],
            ["apis", "Vec<RuntimeApiMetadataV15>"],
            ["outer_enums", "OuterEnums15"],
            ["custom", "Vec<CustomMetadataEntry15>"],
        ],
    },
    "PalletMetadataV15": {
        "type": "struct",
        "type_mapping": [
            ["name", "String"],
            ["storage", "Option<StorageMetadataV14>"],
            ["calls", "Option<PalletCallMetadataV14>"],
            ["event", "Option<PalletEventMetadataV14>"],
            ["constants", "Vec<PalletConstantMetadataV14>"],
            ["error", "Option<PalletErrorMetadataV14>"],
            ["index", "u8"],
            ["docs", "Vec<String>"],
        ],
    },
    "ExtrinsicMetadataV15": {
        "type": "struct",
        "type_mapping": [
            ["version", "u8"],
            ["address_type", "SiLookupTypeId"],
            ["call_type", "SiLookupTypeId"],
            ["signature_type", "SiLookupTypeId"],
            ["extra_type", "SiLookupTypeId"],
            ["signed_extensions", "Vec<SignedExtensionMetadataV14>"],
        ],
    },
    "RuntimeApiMetadataV15": {
        "type": "struct",
        "type_mapping": [
            ["name", "String"],
            ["methods", "Vec<RuntimeApiMethodMetadataV15>"],
            ["docs", "Vec<String>"],
        ],
    },
    "RuntimeApiMethodMetadataV15": {
        "type": "struct",
        "type_mapping": [
            ["name", "String"],
            ["inputs", "Vec<RuntimeApiMethodParamMetadataV15>"],
            ["output", "SiLookupTypeId"],
            ["docs", "Vec<String>"],
        ],
    },
    "RuntimeApiMethodParamMetadataV15": {
        "type": "struct",
        "type_mapping": [["name", "String"], ["type", "SiLookupTypeId"]],
    },
    "OuterEnums15": {
        "type": "struct",
        "type_mapping": [
            ["call_type", "SiLookupTypeId"],
            ["event_type", "SiLookupTypeId"],
            ["error_type", "SiLookupTypeId"],
        ],
    },
    # The custom map (BTreeMap<String, {type, value}>) encodes as a sorted Vec of pairs.
    "CustomMetadataEntry15": {
        "type": "struct",
        "type_mapping": [["name", "String"], ["type", "SiLookupTypeId"], ["value", "Vec<u8>"]],
    },
}


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


def _common(reg: Registry, config: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """What V14 and V15 share, registered in V14's order (so shared types keep their ids)."""
    pallets = [_pallet(p, reg, config) for p in PALLETS]
    return pallets, reg.id(UNCHECKED_EXTRINSIC)


def _signed_extensions(reg: Registry) -> list[dict[str, Any]]:
    return [
        {"identifier": name, "ty": reg.id(extra), "additional_signed": reg.id(additional)}
        for name, extra, additional in SIGNED_EXTENSIONS
    ]


def metadata_dict(config: dict[str, Any]) -> dict[str, Any]:
    """V14 (its digest is part of the built-in runtime blob: a change here changes genesis)."""
    reg = Registry()
    pallets, extrinsic_type = _common(reg, config)
    extrinsic = {
        "ty": extrinsic_type,
        "version": 4,
        "signed_extensions": _signed_extensions(reg),
    }
    runtime_type = reg.id(RUNTIME)
    return {
        "types": {"types": reg.portable()},
        "pallets": pallets,
        "extrinsic": extrinsic,
        "runtime_type": runtime_type,
    }


def metadata_v15_dict(config: dict[str, Any]) -> dict[str, Any]:
    reg = Registry()
    pallets, _ = _common(reg, config)
    for p in pallets:
        p["docs"] = []
    extrinsic = {
        "version": 4,
        "address_type": reg.id(MULTI_ADDRESS),
        "call_type": reg.id(RUNTIME_CALL),
        "signature_type": reg.id(MULTI_SIGNATURE),
        "extra_type": reg.id(EXTRA),
        "signed_extensions": _signed_extensions(reg),
    }
    runtime_type = reg.id(RUNTIME)
    apis = [
        {
            "name": api.name,
            "methods": [
                {
                    "name": m.name,
                    "inputs": [{"name": n, "type": reg.id(t)} for n, t in m.inputs],
                    "output": reg.id(m.output),
                    "docs": [m.docs],
                }
                for m in api.methods
            ],
            "docs": [api.docs],
        }
        for api in RUNTIME_APIS
    ]
    outer_enums = {
        "call_type": reg.id(RUNTIME_CALL),
        "event_type": reg.id(RUNTIME_EVENT),
        "error_type": reg.id(RUNTIME_ERROR),
    }
    return {
        "types": {"types": reg.portable()},
        "pallets": pallets,
        "extrinsic": extrinsic,
        "runtime_type": runtime_type,
        "apis": apis,
        "outer_enums": outer_enums,
        "custom": [],
    }


def encode_metadata(config: dict[str, Any], version: int = 14) -> bytes:
    """``RuntimeMetadataPrefixed``: the ``meta`` magic, then ``RuntimeMetadata::V<version>``."""
    if version not in METADATA_VERSIONS:
        raise ValueError(f"metadata version {version} is not served (only {METADATA_VERSIONS})")
    # scalecodec is imported here only: it is slow to import and only serving nodes need it.
    from scalecodec.base import RuntimeConfiguration
    from scalecodec.type_registry import load_type_registry_preset

    rc = RuntimeConfiguration()
    rc.update_type_registry(load_type_registry_preset("core"))
    if version == 14:
        obj = rc.create_scale_object("MetadataVersioned")
        data = obj.encode(("0x" + METADATA_MAGIC.hex(), {"V14": metadata_dict(config)}))
        return bytes(data.data)
    rc.update_type_registry({"types": _V15_TYPES})
    body = rc.create_scale_object("MetadataV15").encode(metadata_v15_dict(config))
    # RuntimeMetadata is an enum indexed by version: V15 is variant 15.
    return METADATA_MAGIC + bytes((15,)) + bytes(body.data)

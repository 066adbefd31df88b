"""Chain specs for the node: the built-in ``dev`` and ``local`` chains, plain to raw, loading.

The genesis hash comes from ``ops_tools.chainspec.compute_genesis`` on the raw form, so the node
serves exactly what ``ops-tools chainspec genesis-hash`` computes for the same spec.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ops_tools.chainspec.genesis import GenesisInfo, compute_genesis
from ops_tools.chainspec.runtime import RuntimeVersion, read_runtime_version
from ops_tools.chainspec.spec import LoadedSpec, decode_hex, load_spec, raw_storage
from ops_tools.devnode.crypto import keypair_from_suri, ss58
from ops_tools.devnode.runtime.blob import builtin_runtime
from ops_tools.devnode.runtime.genesis import build_storage
from ops_tools.errors import InputError

DEV_ACCOUNTS = ("Alice", "Bob", "Charlie", "Dave", "Eve", "Ferdie")
DEV_ENDOWMENT = 1 << 60  # as the node template endows its development accounts
TOP_FIELDS = (
    "name",
    "id",
    "chainType",
    "bootNodes",
    "telemetryEndpoints",
    "protocolId",
    "properties",
    "codeSubstitutes",
)
CHAIN_TYPES = ("Development", "Local", "Live", "Custom")
PROPERTIES = {"tokenSymbol": "UNIT", "tokenDecimals": 12, "ss58Format": 42}


def _addr(name: str, scheme: str = "Sr25519") -> str:
    return ss58(keypair_from_suri(f"//{name}", scheme).public)


def builtin_plain(chain: str) -> dict[str, Any]:
    """The plain spec of ``dev`` (//Alice authors) or ``local`` (//Alice and //Bob)."""
    authorities = ["Alice"] if chain == "dev" else ["Alice", "Bob"]
    accounts = list(DEV_ACCOUNTS) + [f"{n}//stash" for n in DEV_ACCOUNTS]
    return {
        "name": "Development" if chain == "dev" else "Local Testnet",
        "id": "dev" if chain == "dev" else "local_testnet",
        "chainType": "Development" if chain == "dev" else "Local",
        "bootNodes": [],
        "telemetryEndpoints": None,
        "protocolId": None,
        "properties": dict(PROPERTIES),
        "codeSubstitutes": {},
        "genesis": {
            "runtimeGenesis": {
                "code": "0x" + builtin_runtime().hex(),
                "patch": {
                    "balances": {"balances": [[_addr(a), DEV_ENDOWMENT] for a in accounts]},
                    "aura": {
                        "authorities": [_addr(a) for a in authorities],
                        "slotDurationMs": 6000 if chain == "dev" else 3000,
                    },
                    "grandpa": {"authorities": [[_addr(a, "Ed25519"), 1] for a in authorities]},
                    "sudo": {"key": _addr("Alice")},
                    "operatorStake": {
                        "minStake": 1_000_000_000_000,
                        "epochLength": 100,
                        "maxHeartbeatEpochAdvance": 1,
                    },
                },
            }
        },
    }


def _check_top(data: dict[str, Any], where: str) -> None:
    for name in ("name", "id"):
        if not isinstance(data.get(name), str) or not data[name]:
            raise InputError(f"{where}: field '{name}' must be a non-empty string")
    if data.get("chainType", "Live") not in CHAIN_TYPES:
        raise InputError(
            f"{where}: chainType {data.get('chainType')!r} is not one of {', '.join(CHAIN_TYPES)}"
        )
    boot = data.get("bootNodes", [])
    if not isinstance(boot, list) or not all(isinstance(b, str) for b in boot):
        raise InputError(f"{where}: bootNodes must be a list of multiaddr strings")
    props = data.get("properties")
    if props is not None and not isinstance(props, dict):
        raise InputError(f"{where}: properties must be an object")


def plain_to_raw(data: dict[str, Any], where: str) -> dict[str, Any]:
    """Run the genesis builder over ``genesis.runtimeGenesis`` and return the raw spec."""
    _check_top(data, where)
    genesis = data.get("genesis")
    rg = genesis.get("runtimeGenesis") if isinstance(genesis, dict) else None
    if not isinstance(rg, dict):
        raise InputError(
            f"{where}: genesis.runtimeGenesis is missing; a plain spec needs code and patch"
        )
    unknown = set(rg) - {"code", "patch"}
    if unknown:
        raise InputError(
            f"{where}: genesis.runtimeGenesis.{sorted(unknown)[0]}:"
            " unknown field (use code and patch)"
        )
    code = decode_hex(rg.get("code"), f"{where}: genesis.runtimeGenesis.code")
    version = read_runtime_version(code)  # fails with a clear message on a corrupt blob
    if version is None:
        raise InputError(f"{where}: genesis.runtimeGenesis.code carries no runtime_version section")
    try:
        storage = build_storage(code, rg.get("patch", {}))
    except InputError as exc:
        raise InputError(f"{where}: genesis.runtimeGenesis.{exc}") from None
    out = {
        k: data.get(k, [] if k == "bootNodes" else {} if k == "codeSubstitutes" else None)
        for k in TOP_FIELDS
    }
    out["chainType"] = data.get("chainType", "Live")
    # Other top-level fields (forkId, lightSyncState, ...) pass through, after the standard ones.
    out.update({k: v for k, v in data.items() if k not in out and k != "genesis"})
    top = {"0x" + k.hex(): "0x" + v.hex() for k, v in sorted(storage.items())}
    out["genesis"] = {"raw": {"top": top, "childrenDefault": {}}}
    return out


def render(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class ChainSpec:
    data: dict[str, Any]  # raw form
    source: str
    storage: dict[bytes, bytes]
    genesis: GenesisInfo
    runtime: RuntimeVersion

    @property
    def id(self) -> str:
        return self.data["id"]

    @property
    def name(self) -> str:
        return self.data["name"]

    @property
    def chain_type(self) -> str:
        return self.data.get("chainType") or "Live"

    @property
    def properties(self) -> dict[str, Any]:
        return self.data.get("properties") or {}

    @property
    def boot_nodes(self) -> list[str]:
        return list(self.data.get("bootNodes") or [])


def resolve_plain(chain: str) -> tuple[dict[str, Any], str]:
    """The spec data for ``--chain`` (``dev``, ``local`` or a path) and a name for errors."""
    if chain in ("dev", "local"):
        return builtin_plain(chain), chain
    if chain in ("", "staging"):
        raise InputError(
            f"--chain {chain!r}: unknown chain; use dev, local or the path of a spec file"
        )
    loaded = load_spec(Path(chain))
    return loaded.data, str(loaded.path)


def load_chain(chain: str) -> ChainSpec:
    data, where = resolve_plain(chain)
    genesis = data.get("genesis")
    if not isinstance(genesis, dict):
        raise InputError(f"{where}: field 'genesis' is missing or not an object")
    if "raw" not in genesis:
        data = plain_to_raw(data, where)
    _check_top(data, where)
    text = render(data).encode()
    loaded = LoadedSpec(Path(where), text, data)
    storage = raw_storage(loaded)
    if any(storage.children_default.values()):
        raise InputError(
            f"{where}: child storage (genesis.raw.childrenDefault) is not supported by devnode"
        )
    info = compute_genesis(loaded)
    if info.runtime is None:
        raise InputError(
            f"{where}: :code carries no runtime version; devnode needs spec and state version"
        )
    return ChainSpec(data, where, dict(storage.top), info, info.runtime)

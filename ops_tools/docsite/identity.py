"""The chain identity the site shows, read from a raw chain spec: its properties, the runtime
version in ``:code`` and the ``OperatorStake`` parameters in genesis storage (what the runtime
starts with; its metadata constants are read from the same storage item)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ops_tools.chainspec.hashing import storage_prefix
from ops_tools.chainspec.runtime import read_runtime_version
from ops_tools.chainspec.spec import LoadedSpec, load_spec, raw_storage
from ops_tools.errors import InputError

# pallet_operator_stake::Params: min_stake u128, epoch_length u64, max_heartbeat_epoch_advance u64.
PARAMS_KEY = storage_prefix("OperatorStake", "Params")
PARAMS_LEN = 16 + 8 + 8


@dataclass(frozen=True)
class ChainIdentity:
    name: str
    id: str
    protocol_id: str | None
    ss58_prefix: int | None
    token_symbol: str | None
    token_decimals: int | None
    spec_name: str | None
    spec_version: int | None
    min_stake: int | None
    epoch_length: int | None
    max_heartbeat_epoch_advance: int | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def decode_params(value: bytes, where: str) -> tuple[int, int, int]:
    """(MinStake, EpochLength, MaxHeartbeatEpochAdvance) from the SCALE bytes of Params."""
    if len(value) != PARAMS_LEN:
        raise InputError(
            f"{where}: OperatorStake.Params is {len(value)} bytes, expected {PARAMS_LEN}"
            " (u128 + u64 + u64); is this a spec of the NET runtime?"
        )
    return (
        int.from_bytes(value[:16], "little"),
        int.from_bytes(value[16:24], "little"),
        int.from_bytes(value[24:32], "little"),
    )


def identity_of(spec: LoadedSpec) -> ChainIdentity:
    storage = raw_storage(spec)  # refuses a plain or light spec with one line
    props = spec.data.get("properties") or {}
    version = read_runtime_version(storage.code) if storage.code else None
    params = storage.top.get(PARAMS_KEY)
    min_stake = epoch = advance = None
    if params is not None:
        min_stake, epoch, advance = decode_params(params, str(spec.path))
    return ChainIdentity(
        name=str(spec.data.get("name")),
        id=str(spec.data.get("id")),
        protocol_id=spec.data.get("protocolId"),
        ss58_prefix=_int_or_none(props.get("ss58Format")),
        token_symbol=props.get("tokenSymbol"),
        token_decimals=_int_or_none(props.get("tokenDecimals")),
        spec_name=version.spec_name if version else None,
        spec_version=version.spec_version if version else None,
        min_stake=min_stake,
        epoch_length=epoch,
        max_heartbeat_epoch_advance=advance,
    )


def identity_of_file(path: Path) -> ChainIdentity:
    return identity_of(load_spec(path))


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None

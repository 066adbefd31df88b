"""Typed access to the key-value state through the runtime's storage declarations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ops_tools.devnode.runtime.definitions import BY_NAME


class State:
    """The full top-level state of one block: raw key bytes to raw value bytes."""

    def __init__(self, data: dict[bytes, bytes] | None = None) -> None:
        self.data: dict[bytes, bytes] = dict(data or {})

    def copy(self) -> State:
        return State(self.data)

    def get(self, pallet: str, item: str, key: Any = None) -> Any:
        """The decoded value; the declared default when absent (``None`` for Optional items)."""
        decl = BY_NAME[pallet].item(item)
        raw = self.data.get(decl.key_of(pallet, key))
        if raw is None:
            raw = decl.default
            if raw is None:
                return None
        return decl.value.decode_all(raw)

    def put(self, pallet: str, item: str, value: Any, key: Any = None) -> None:
        decl = BY_NAME[pallet].item(item)
        self.data[decl.key_of(pallet, key)] = decl.value.encode(value)

    def kill(self, pallet: str, item: str, key: Any = None) -> None:
        self.data.pop(BY_NAME[pallet].item(item).key_of(pallet, key), None)


@dataclass(frozen=True)
class ChainConfig:
    """The chain's behaviour-changing settings, all read from (genesis) storage."""

    slot_duration: int
    min_stake: int
    epoch_length: int
    max_heartbeat_epoch_advance: int
    base_fee: int
    length_fee: int
    weight_fee: int
    aura_authorities: tuple[bytes, ...]
    grandpa_authorities: tuple[tuple[bytes, int], ...]
    sudo_key: bytes | None

    def as_constants(self) -> dict[str, int]:
        return {
            "slot_duration": self.slot_duration,
            "min_stake": self.min_stake,
            "epoch_length": self.epoch_length,
            "max_heartbeat_epoch_advance": self.max_heartbeat_epoch_advance,
        }


def read_config(state: State) -> ChainConfig:
    params = state.get("OperatorStake", "Params") or {
        "min_stake": 0,
        "epoch_length": 1,
        "max_heartbeat_epoch_advance": 0,
    }
    fees = state.get("TransactionPayment", "FeeParams") or {
        "base_fee": 0,
        "length_fee": 0,
        "weight_fee": 0,
    }
    return ChainConfig(
        slot_duration=state.get("Aura", "SlotDuration"),
        min_stake=params["min_stake"],
        epoch_length=max(1, params["epoch_length"]),
        max_heartbeat_epoch_advance=params["max_heartbeat_epoch_advance"],
        base_fee=fees["base_fee"],
        length_fee=fees["length_fee"],
        weight_fee=fees["weight_fee"],
        aura_authorities=tuple(state.get("Aura", "Authorities")),
        grandpa_authorities=tuple((k, w) for k, w in state.get("Grandpa", "Authorities")),
        sudo_key=state.get("Sudo", "Key"),
    )

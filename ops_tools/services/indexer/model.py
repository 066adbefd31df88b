"""What the processor stores, as plain values: decoded blocks and the domain rows derived from
their events. No I/O here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RawBlock:
    """A block as fetched over RPC, before decoding."""

    number: int
    hash: str
    parent_hash: str
    extrinsics: list[str]
    events: str | None  # SCALE hex of System.Events, None when the storage is empty
    spec_version: int
    timestamp: int | None = None  # Timestamp.Now (ms), None when the chain keeps no time


@dataclass
class Extrinsic:
    index: int
    hash: str
    signer: str | None
    pallet: str
    call: str
    args: dict[str, Any]
    success: bool = True
    fee: int | None = None
    error: Any = None


@dataclass
class Event:
    index: int
    extrinsic_index: int | None
    phase: str  # ApplyExtrinsic, Finalization, Initialization
    pallet: str
    name: str
    args: dict[str, Any]
    accounts: list[str] = field(default_factory=list)


@dataclass
class Transfer:
    event_index: int
    extrinsic_index: int | None
    extrinsic_hash: str | None
    sender: str
    recipient: str
    amount: int


@dataclass
class Heartbeat:
    event_index: int
    extrinsic_hash: str | None
    account: str
    epoch: int


@dataclass
class Block:
    number: int
    hash: str
    parent_hash: str
    spec_version: int
    extrinsics: list[Extrinsic]
    events: list[Event]
    transfers: list[Transfer]
    heartbeats: list[Heartbeat]
    timestamp: int | None = None

    def touched_accounts(self) -> set[str]:
        out: set[str] = set()
        for ev in self.events:
            out.update(ev.accounts)
        for xt in self.extrinsics:
            if xt.signer:
                out.add(xt.signer)
        return out

    def touched_operators(self) -> set[str]:
        return {a for ev in self.events if ev.pallet == "OperatorStake" for a in ev.accounts}

"""Decoding blocks and events with the runtime metadata of the block's spec version (pure).

One ``Runtime`` per spec version: scalecodec's type registry is filled from that version's
portable registry (metadata V14+), so a runtime upgrade never decodes old blocks with new types.
Its configuration is a ``ScaleConfig``: decoded objects keep it, whichever version's decoders were
built or used last, on whichever thread, and it builds each composite decoder class once.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

from scalecodec.base import ScaleBytes
from scalecodec.type_registry import load_type_registry_preset
from scalecodec.utils.ss58 import ss58_decode

from ops_tools.chain.scale import ScaleConfig
from ops_tools.services.indexer.model import Block, Event, Extrinsic, Heartbeat, RawBlock, Transfer

EVENTS_MEMO_MAX_HEX = 2048
EVENTS_MEMO_SIZE = 256


class DecodeError(Exception):
    """A block or its events do not decode with the metadata of their spec version."""


class Runtime:
    """The decoders of one spec version."""

    def __init__(self, spec_version: int, metadata_hex: str, ss58_format: int = 42) -> None:
        self.spec_version = spec_version
        self.ss58_format = ss58_format
        self.config = ScaleConfig(ss58_format=ss58_format)
        self.config.update_type_registry(load_type_registry_preset("core"))
        self.metadata = self.config.create_scale_object(
            "MetadataVersioned", data=ScaleBytes(metadata_hex)
        )
        self.metadata.decode()
        self.config.add_portable_registry(self.metadata)
        self.config.set_active_spec_version_id(spec_version)
        self.events_type = (
            self.metadata.get_metadata_pallet("System")
            .get_storage_function("Events")
            .get_value_type_string()
        )
        self._events_memo: dict[str, list[dict[str, Any]]] = {}

    def storage_value_type(self, pallet: str, item: str) -> str:
        function = self.metadata.get_metadata_pallet(pallet).get_storage_function(item)
        return function.get_value_type_string()

    def decode_value(self, type_string: str, data_hex: str) -> Any:
        obj = self.config.create_scale_object(type_string, data=ScaleBytes(data_hex),
                                              metadata=self.metadata)
        return obj.decode()

    def decode_events(self, data_hex: str | None) -> list[dict[str, Any]]:
        """The decoded event records (shared between equal inputs: not to be modified)."""
        if not data_hex or data_hex in ("0x", "0x00"):  # no storage, or an empty Vec
            return []
        # Blocks without transactions carry byte-identical events (the inherents' outcome),
        # and they are most blocks of a quiet chain: decode each distinct short vector once.
        short = len(data_hex) <= EVENTS_MEMO_MAX_HEX
        if short and (found := self._events_memo.get(data_hex)) is not None:
            return found
        try:
            records = list(self.decode_value(self.events_type, data_hex))
        except Exception as exc:  # scalecodec raises many kinds; all mean "does not decode"
            raise DecodeError(f"events do not decode with spec version {self.spec_version}: "
                              f"{exc}") from exc
        if short:
            if len(self._events_memo) >= EVENTS_MEMO_SIZE:
                self._events_memo.pop(next(iter(self._events_memo)))
            self._events_memo[data_hex] = records
        return records

    def decode_extrinsic(self, data_hex: str) -> dict[str, Any]:
        try:
            obj = self.config.create_scale_object("Extrinsic", data=ScaleBytes(data_hex),
                                                  metadata=self.metadata)
            return obj.decode()
        except Exception as exc:
            raise DecodeError(f"extrinsic does not decode with spec version {self.spec_version}: "
                              f"{exc}") from exc


def extrinsic_hash(data_hex: str) -> str:
    return "0x" + hashlib.blake2b(bytes.fromhex(data_hex.removeprefix("0x")),
                                  digest_size=32).hexdigest()


@functools.lru_cache(maxsize=65536)
def _is_account(value: str, ss58_format: int) -> bool:
    if not 46 <= len(value) <= 48:
        return False
    try:
        ss58_decode(value, valid_ss58_format=ss58_format)
    except (ValueError, IndexError, TypeError):
        return False
    return True


def accounts_in(value: Any, ss58_format: int = 42) -> list[str]:
    """Every ss58 address inside a decoded value (event fields), in order, without repeats.
    The ss58 checksum makes a false match of another string practically impossible."""
    found: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str):
            if _is_account(v, ss58_format) and v not in found:
                found.append(v)
        elif isinstance(v, dict):
            for item in v.values():
                walk(item)
        elif isinstance(v, list | tuple):
            for item in v:
                walk(item)

    walk(value)
    return found


def _phase(record: dict[str, Any]) -> tuple[str, int | None]:
    phase = record.get("phase")
    if isinstance(phase, dict):
        (name, idx), = phase.items()
        return name, idx
    if phase == "ApplyExtrinsic":
        return "ApplyExtrinsic", record.get("extrinsic_idx")
    return str(phase), None


def _args(call: dict[str, Any]) -> dict[str, Any]:
    return {a["name"]: a["value"] for a in call.get("call_args", [])}


def decode_block(raw: RawBlock, runtime: Runtime) -> Block:
    """A fetched block, decoded: extrinsics with signer, call, success and fee; events with
    pallet, name, fields, phase and the accounts they name; transfers and heartbeats."""
    extrinsics: list[Extrinsic] = []
    for idx, data in enumerate(raw.extrinsics):
        value = runtime.decode_extrinsic(data)
        call = value.get("call") or {}
        extrinsics.append(Extrinsic(
            index=idx, hash=extrinsic_hash(data), signer=value.get("address"),
            pallet=call.get("call_module", "?"), call=call.get("call_function", "?"),
            args=_args(call),
        ))
    events: list[Event] = []
    transfers: list[Transfer] = []
    heartbeats: list[Heartbeat] = []
    for idx, record in enumerate(runtime.decode_events(raw.events)):
        phase, xt_idx = _phase(record)
        pallet, name = record["module_id"], record["event_id"]
        args = record.get("attributes") or {}
        if not isinstance(args, dict):
            args = {"value": args}
        ev = Event(index=idx, extrinsic_index=xt_idx, phase=phase, pallet=pallet, name=name,
                   args=args, accounts=accounts_in(args, runtime.ss58_format))
        events.append(ev)
        xt = extrinsics[xt_idx] if xt_idx is not None and xt_idx < len(extrinsics) else None
        xt_hash = xt.hash if xt else None
        if xt is not None:
            if pallet == "System" and name == "ExtrinsicFailed":
                xt.success = False
                xt.error = args.get("dispatch_error")
            elif pallet == "TransactionPayment" and name == "TransactionFeePaid":
                xt.fee = int(args.get("actual_fee", 0))
        if pallet == "Balances" and name == "Transfer":
            transfers.append(Transfer(event_index=idx, extrinsic_index=xt_idx,
                                      extrinsic_hash=xt_hash, sender=args["from"],
                                      recipient=args["to"], amount=int(args["amount"])))
        elif pallet == "OperatorStake" and name == "HeartbeatReceived":
            heartbeats.append(Heartbeat(event_index=idx, extrinsic_hash=xt_hash,
                                        account=args["who"], epoch=int(args["epoch"])))
    return Block(number=raw.number, hash=raw.hash, parent_hash=raw.parent_hash,
                 spec_version=raw.spec_version, extrinsics=extrinsics, events=events,
                 transfers=transfers, heartbeats=heartbeats, timestamp=raw.timestamp)

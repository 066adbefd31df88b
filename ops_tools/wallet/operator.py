"""Chain reads and writes of an operator: balance, OperatorStake::register and ::heartbeat.

Everything here takes a connected ``SubstrateInterface``; connecting and error wording for the
transport live in ``rpc``, the remedies in ``errors``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scalecodec.base import ScaleType
from substrateinterface import Keypair, SubstrateInterface
from substrateinterface.exceptions import SubstrateRequestException

from ops_tools.errors import OpsError
from ops_tools.wallet.errors import ChainRejection, Facts, remedy, remedy_for_invalid_transaction
from ops_tools.wallet.tokens import format_tokens

PALLET = "OperatorStake"


@dataclass(frozen=True)
class Balance:
    address: str
    free: int
    reserved: int
    frozen: int
    symbol: str

    def amounts(self) -> tuple[tuple[str, int], ...]:
        return (("free", self.free), ("reserved", self.reserved), ("frozen", self.frozen))

    def to_json(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "symbol": self.symbol,
            "decimals": 12,
            **{
                label: {"plancks": str(value), "tokens": format_tokens(value)}
                for label, value in self.amounts()
            },
        }


@dataclass
class Submission:
    """What happened to one extrinsic that reached a block."""

    call: str
    signer: str
    extrinsic_hash: str
    block_hash: str
    block_number: int
    success: bool
    events: list[dict[str, Any]] = field(default_factory=list)
    fee: int | None = None
    error_pallet: str | None = None
    error_name: str | None = None
    error_docs: str | None = None
    remedy: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ok": self.success,
            "call": self.call,
            "signer": self.signer,
            "extrinsic_hash": self.extrinsic_hash,
            "block_hash": self.block_hash,
            "block_number": self.block_number,
            "fee_plancks": None if self.fee is None else str(self.fee),
            "events": self.events,
        }
        if not self.success:
            out["error"] = {
                "pallet": self.error_pallet,
                "name": self.error_name,
                "docs": self.error_docs,
                "remedy": self.remedy,
            }
        return out


def token_symbol(substrate: SubstrateInterface) -> str:
    props = substrate.properties or {}
    symbol = props.get("tokenSymbol")
    if isinstance(symbol, list):  # multi-token chains list several; the native one is first
        symbol = symbol[0] if symbol else None
    return str(symbol) if symbol else "tokens"


def read_balance(substrate: SubstrateInterface, address: str) -> Balance:
    info = substrate.query("System", "Account", [address]).value
    data = info["data"]
    # FRAME renamed misc_frozen/fee_frozen to one `frozen` (polkadot-sdk 1.0); read both shapes.
    frozen = data.get("frozen")
    if frozen is None:
        frozen = max(data.get("misc_frozen", 0), data.get("fee_frozen", 0))
    return Balance(
        address=address,
        free=int(data["free"]),
        reserved=int(data["reserved"]),
        frozen=int(frozen),
        symbol=token_symbol(substrate),
    )


def _constant(substrate: SubstrateInterface, name: str) -> int | None:
    value = substrate.get_constant(PALLET, name)
    return None if value is None else int(value.value)


def min_stake(substrate: SubstrateInterface) -> int | None:
    return _constant(substrate, "MinStake")


def current_epoch(substrate: SubstrateInterface) -> int:
    return int(substrate.query(PALLET, "CurrentEpoch").value)


def operator_record(substrate: SubstrateInterface, address: str) -> dict[str, Any] | None:
    result = substrate.query(PALLET, "Operators", [address])
    return result.value if result is not None else None


def require_pallet(substrate: SubstrateInterface, url: str) -> None:
    if substrate.metadata.get_metadata_pallet(PALLET) is None:
        raise OpsError(
            f"RPC {url}: the chain has no {PALLET} pallet; point --rpc-url at a node of the"
            " test network"
        )


def gather_facts(
    substrate: SubstrateInterface,
    address: str,
    *,
    name: str = "<name>",
    stake: int | None = None,
    epoch: int | None = None,
) -> Facts:
    """Read what a remedy needs. Best effort: a failing read leaves its field unknown."""
    facts = Facts(address=address, name=name, stake=stake, epoch=epoch)
    reads: list[tuple[str, Any]] = [
        ("symbol", lambda: token_symbol(substrate)),
        ("free", lambda: read_balance(substrate, address).free),
        ("min_stake", lambda: min_stake(substrate)),
        ("max_advance", lambda: _constant(substrate, "MaxHeartbeatEpochAdvance")),
        ("current_epoch", lambda: current_epoch(substrate)),
    ]
    for name, read in reads:
        try:
            setattr(facts, name, read())
        except Exception:  # noqa: S112 - a missing fact only shortens the message
            continue
    try:
        record = operator_record(substrate, address)
    except Exception:
        record = None
    if record:
        facts.last_heartbeat_epoch = _int_or_none(record.get("last_heartbeat_epoch"))
        facts.registered_at = _int_or_none(record.get("registered_at"))
        facts.registered_stake = _int_or_none(record.get("stake"))
    return facts


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int) else None


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return "0x" + value.hex()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _event(record: ScaleType) -> dict[str, Any]:
    value = record.value
    return {
        "pallet": value["module_id"],
        "event": value["event_id"],
        "attributes": _jsonable(value.get("attributes")),
    }


def _dispatch_error(substrate: SubstrateInterface, events: list[ScaleType]) -> tuple[str, str, str]:
    """(pallet, error, docs) from System.ExtrinsicFailed; module errors resolved by index."""
    for record in events:
        value = record.value
        if (value["module_id"], value["event_id"]) != ("System", "ExtrinsicFailed"):
            continue
        error = value["attributes"]["dispatch_error"]
        if isinstance(error, dict) and "Module" in error:
            module = error["Module"]
            index, err = (module["index"], module["error"]) if isinstance(module, dict) else module
            # Since polkadot v0.9.25 the error is [u8; 4] whose first byte is the variant.
            err_index = int(err[2:4], 16) if isinstance(err, str) else int(err)
            pallet = substrate.metadata.get_pallet_by_index(index).value["name"]
            meta = substrate.metadata.get_module_error(module_index=index, error_index=err_index)
            docs = " ".join(meta.docs) if meta is not None else ""
            return pallet, meta.name if meta is not None else f"error #{err_index}", docs
        name = next(iter(error)) if isinstance(error, dict) else str(error)
        return "System", name, ""
    return "System", "Unknown", "the extrinsic failed without a System.ExtrinsicFailed event"


def submit(
    substrate: SubstrateInterface,
    keypair: Keypair,
    call_function: str,
    params: dict[str, Any],
    *,
    account_name: str = "<name>",
    stake: int | None = None,
    epoch: int | None = None,
) -> Submission:
    """Sign, submit, wait for inclusion; a dispatch failure comes back as ``success=False``.

    A pool rejection (the extrinsic never reaches a block) raises ``ChainRejection``.
    """
    call = substrate.compose_call(PALLET, call_function, params)
    extrinsic = substrate.create_signed_extrinsic(call=call, keypair=keypair)
    label = f"{PALLET}.{call_function}"
    try:
        receipt = substrate.submit_extrinsic(extrinsic, wait_for_inclusion=True)
    except SubstrateRequestException as exc:
        error = exc.args[0] if exc.args else {}
        reason = (
            f"{error.get('message', '')}: {error.get('data', '')}".strip(": ")
            if isinstance(error, dict)
            else str(error)
        )
        facts = gather_facts(
            substrate, keypair.ss58_address, name=account_name, stake=stake, epoch=epoch
        )
        fix = remedy_for_invalid_transaction(reason, facts)
        raise ChainRejection(
            f"{label} rejected by the node before inclusion: {reason}; {fix}",
            {
                "ok": False,
                "call": label,
                "signer": keypair.ss58_address,
                "extrinsic_hash": "0x" + extrinsic.extrinsic_hash.hex(),
                "error": {
                    "pallet": None, "name": "InvalidTransaction", "docs": reason, "remedy": fix,
                },
            },
        ) from exc
    except ValueError as exc:  # substrate-interface's "Submit extrinsic failed: dropped"
        raise OpsError(f"{label}: {exc}; the pool dropped it, retry") from exc
    events = receipt.triggered_events
    sub = Submission(
        call=label,
        signer=keypair.ss58_address,
        extrinsic_hash=receipt.extrinsic_hash,
        block_hash=receipt.block_hash,
        block_number=substrate.get_block_number(receipt.block_hash),
        success=bool(receipt.is_success),
        events=[_event(e) for e in events],
        fee=receipt.total_fee_amount,
    )
    if not sub.success:
        sub.error_pallet, sub.error_name, sub.error_docs = _dispatch_error(substrate, events)
        facts = gather_facts(
            substrate, keypair.ss58_address, name=account_name, stake=stake, epoch=epoch
        )
        sub.remedy = remedy(sub.error_pallet, sub.error_name, facts)
    return sub


def register(
    substrate: SubstrateInterface,
    keypair: Keypair,
    stake: int,
    attestation_hash: str,
    account_name: str = "<name>",
) -> Submission:
    return submit(
        substrate,
        keypair,
        "register",
        {"stake": stake, "attestation_hash": attestation_hash},
        account_name=account_name,
        stake=stake,
    )


def heartbeat(
    substrate: SubstrateInterface, keypair: Keypair, epoch: int, account_name: str = "<name>"
) -> Submission:
    return submit(
        substrate, keypair, "heartbeat", {"epoch": epoch}, account_name=account_name, epoch=epoch
    )


def genesis_hash(substrate: SubstrateInterface) -> str:
    result = substrate.rpc_request("chain_getBlockHash", [0]).get("result")
    if not isinstance(result, str) or len(result) != 66:
        raise OpsError(f"chain_getBlockHash [0] returned {result!r}, not a block hash")
    return result.lower()

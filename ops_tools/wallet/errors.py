"""What went wrong on the chain, and what the operator does about it.

Pure: ``remedy`` turns a dispatch error name and the chain facts read after the failure into
one sentence; the facts are read by ``operator.gather_facts``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ops_tools.errors import OpsError
from ops_tools.wallet.tokens import describe_amount

FAUCET_HINT = (
    "fund it from the faucet (POST <faucet>/drip-public with"
    ' {{"recipient": "{address}"}}) or by a transfer from a funded account, then retry'
)


class RpcUnreachableError(OpsError):
    """The RPC endpoint did not answer (refused, unresolvable, timed out, not a node)."""

    exit_code = 3


class ChainRejection(OpsError):
    """The chain refused the extrinsic (pool validation or dispatch). ``details`` is for --json."""

    exit_code = 1

    def __init__(self, message: str, details: dict[str, Any]) -> None:
        super().__init__(message)
        self.details = details


@dataclass
class Facts:
    """Chain state next to a failure; anything unknown stays None and is left out of the text."""

    address: str
    name: str = "<name>"
    symbol: str = "tokens"
    free: int | None = None
    reserved: int | None = None
    min_stake: int | None = None
    stake: int | None = None
    epoch: int | None = None
    current_epoch: int | None = None
    last_heartbeat_epoch: int | None = None
    max_advance: int | None = None
    registered_at: int | None = None
    registered_stake: int | None = None


def _amount(plancks: int | None, symbol: str) -> str:
    return describe_amount(plancks, symbol) if plancks is not None else "unknown"


def _faucet(address: str) -> str:
    return FAUCET_HINT.format(address=address)


def _epoch_rule(f: Facts) -> str:
    advance = f.max_advance if f.max_advance is not None else "MaxHeartbeatEpochAdvance"
    rule = (
        f"the rule is epoch >= last_heartbeat_epoch and epoch - last_heartbeat_epoch <= {advance}"
        " (MaxHeartbeatEpochAdvance)"
    )
    known = []
    if f.last_heartbeat_epoch is not None:
        known.append(f"last_heartbeat_epoch of {f.address} is {f.last_heartbeat_epoch}")
    if f.current_epoch is not None:
        known.append(f"the current epoch (OperatorStake.CurrentEpoch) is {f.current_epoch}")
    tail = f"; {', '.join(known)}" if known else ""
    if f.current_epoch is not None:
        todo = f"; pass --epoch {f.current_epoch}"
        last, advance_n = f.last_heartbeat_epoch, f.max_advance
        if last is not None and advance_n is not None and not (
            last <= f.current_epoch <= last + advance_n
        ):
            todo = f"; pass an epoch from {last} to {last + advance_n}"
    else:
        todo = "; pass the current epoch"
    return f"{rule}{tail}{todo}"


def _next_epoch(f: Facts) -> str:
    """The epoch the next heartbeat should carry: the current one, if the rule allows it."""
    if f.current_epoch is None:
        return "<current epoch>"
    if f.last_heartbeat_epoch is not None and f.max_advance is not None:
        return str(min(max(f.current_epoch, f.last_heartbeat_epoch),
                       f.last_heartbeat_epoch + f.max_advance))
    return str(f.current_epoch)


def remedy(pallet: str, name: str, f: Facts) -> str:
    """One sentence: the rule that was broken, with the numbers, and the next step."""
    sym = f.symbol
    if name == "StakeBelowMinimum":
        minimum = (
            f"MinStake is {describe_amount(f.min_stake, sym)}; pass --stake {f.min_stake} or more"
            if f.min_stake is not None
            else "the stake must be at least MinStake (1_000_000_000_000 plancks on the testnet)"
        )
        asked = ""
        if f.stake is not None:
            asked = f"the stake {_amount(f.stake, sym)} is below the minimum: "
        return asked + minimum
    if name in ("InsufficientBalance", "FundsUnavailable", "Overflow", "InsufficientFunds"):
        have = f"free balance of {f.address} is {_amount(f.free, sym)}"
        need = f", the stake is {_amount(f.stake, sym)} plus the fee" if f.stake is not None else ""
        return f"{have}{need}; {_faucet(f.address)}"
    if name == "AlreadyRegistered":
        record = ""
        if f.registered_stake is not None:
            record = f" with stake {describe_amount(f.registered_stake, sym)}"
        if f.registered_at is not None:
            record += f", registered at block {f.registered_at}"
        return (
            f"{f.address} is already a registered operator{record}; nothing to do, submit"
            f" heartbeats with `wallet-cli heartbeat-test {f.name} --submit --epoch"
            f" {_next_epoch(f)}`"
        )
    if name == "NotRegistered":
        return (
            f"{f.address} is not a registered operator; register it first with"
            f" `wallet-cli register-operator {f.name} --stake <plancks>`"
        )
    if name == "HeartbeatEpochInPast":
        return f"epoch {f.epoch} is before the last heartbeat epoch: {_epoch_rule(f)}"
    if name == "HeartbeatEpochTooFarAhead":
        return f"epoch {f.epoch} is too far ahead of the last heartbeat epoch: {_epoch_rule(f)}"
    if name == "BadOrigin":
        return "the call needs a signed origin; this is a bug in wallet-cli, please report it"
    return f"see the error's documentation in the runtime metadata ({pallet}.{name})"


def remedy_for_invalid_transaction(reason: str, f: Facts) -> str:
    """Pool rejections (JSON-RPC 1010/1011): they happen before dispatch, nothing is charged."""
    text = reason.lower()
    if "pay" in text or "balance" in text:
        return (
            f"{f.address} cannot pay the transaction fee (free balance"
            f" {_amount(f.free, f.symbol)}); {_faucet(f.address)}"
        )
    if "outdated" in text or "stale" in text or "future" in text:
        return "the nonce or era is stale (another transaction of this account raced it); retry"
    if "signature" in text:
        return "the node rejected the signature; check that --rpc-url points at the right network"
    return "the node's transaction pool rejected the extrinsic; check the node's log"

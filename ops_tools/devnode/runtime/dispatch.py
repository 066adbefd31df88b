"""What the calls do: the pallets' dispatchable logic.

A handler raises ``DispatchFailure`` with a ``DispatchError`` value; the executive then rolls
the call's storage changes and events back (calls are transactional, as in FRAME) and records
``System.ExtrinsicFailed``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ops_tools.devnode.runtime.definitions import BY_NAME, EXISTENTIAL_DEPOSIT, PLACEHOLDERS
from ops_tools.devnode.runtime.state import ChainConfig, State

SIGNED, ROOT = "Signed", "Root"
Origin = tuple[str, bytes | None]


class DispatchFailure(Exception):
    def __init__(self, error: Any) -> None:
        super().__init__(str(error))
        self.error = error


def module_error(pallet: str, name: str) -> DispatchFailure:
    p = BY_NAME[pallet]
    return DispatchFailure(
        ("Module", {"index": p.index, "error": bytes((p.error_index(name), 0, 0, 0))})
    )


BAD_ORIGIN = ("BadOrigin", None)


@dataclass
class BlockEnv:
    """The state being built for one block, and the events deposited so far."""

    state: State
    number: int
    config: ChainConfig
    events: list[dict[str, Any]] = field(default_factory=list)
    phase: Any = ("Initialization", None)

    def deposit(self, pallet: str, event: str, payload: Any = None) -> None:
        self.events.append({"phase": self.phase, "event": (pallet, (event, payload)), "topics": []})


# ---- accounts and balances -------------------------------------------------------------------


def account(env: BlockEnv, who: bytes) -> dict[str, Any]:
    return env.state.get("System", "Account", who)


def _exists(info: dict[str, Any]) -> bool:
    return info["providers"] > 0 or info["sufficients"] > 0


def set_account(env: BlockEnv, who: bytes, info: dict[str, Any]) -> None:
    env.state.put("System", "Account", info, who)


def _issuance(env: BlockEnv, delta: int) -> None:
    env.state.put("Balances", "TotalIssuance", env.state.get("Balances", "TotalIssuance") + delta)


def withdraw_fee(env: BlockEnv, who: bytes, amount: int) -> None:
    info = account(env, who)
    info["data"]["free"] -= amount
    set_account(env, who, info)
    _issuance(env, -amount)  # fees are burned on this chain
    env.deposit("Balances", "Withdraw", {"who": who, "amount": amount})


def _credit(env: BlockEnv, who: bytes, amount: int) -> None:
    info = account(env, who)
    if not _exists(info):
        if amount < EXISTENTIAL_DEPOSIT:
            raise module_error("Balances", "ExistentialDeposit")
        info["providers"] = 1
        info["data"]["free"] = amount
        info["data"]["flags"] = 1 << 127
        set_account(env, who, info)
        env.deposit("System", "NewAccount", {"account": who})
        env.deposit("Balances", "Endowed", {"account": who, "free_balance": amount})
        return
    info["data"]["free"] += amount
    set_account(env, who, info)


def transfer(env: BlockEnv, source: bytes, dest: bytes, amount: int, keep_alive: bool) -> None:
    info = account(env, source)
    free = info["data"]["free"]
    if amount > free:
        raise module_error("Balances", "InsufficientBalance")
    remaining = free - amount
    if remaining < EXISTENTIAL_DEPOSIT and (keep_alive or info["consumers"] > 0):
        raise DispatchFailure(("Token", "NotExpendable"))
    if source == dest:
        return
    info["data"]["free"] = remaining
    _credit(env, dest, amount)
    env.deposit("Balances", "Transfer", {"from": source, "to": dest, "amount": amount})
    if remaining < EXISTENTIAL_DEPOSIT:
        # Below the existential deposit the account is reaped and its dust is lost.
        env.state.kill("System", "Account", source)
        _issuance(env, -remaining)
        if remaining:
            env.deposit("Balances", "DustLost", {"account": source, "amount": remaining})
        env.deposit("System", "KilledAccount", {"account": source})
    else:
        set_account(env, source, info)


def _lookup(address: Any) -> bytes:
    kind, value = address
    if kind in ("Id", "Address32"):
        return value
    raise DispatchFailure(("CannotLookup", None))


def _signed(origin: Origin) -> bytes:
    kind, who = origin
    if kind != SIGNED or who is None:
        raise DispatchFailure(BAD_ORIGIN)
    return who


# ---- handlers --------------------------------------------------------------------------------


def _remark(env: BlockEnv, origin: Origin, args: dict[str, Any]) -> None:
    if origin[0] != ROOT:
        _signed(origin)


def _transfer_allow_death(env: BlockEnv, origin: Origin, args: dict[str, Any]) -> None:
    transfer(env, _signed(origin), _lookup(args["dest"]), args["value"], keep_alive=False)


def _transfer_keep_alive(env: BlockEnv, origin: Origin, args: dict[str, Any]) -> None:
    transfer(env, _signed(origin), _lookup(args["dest"]), args["value"], keep_alive=True)


def _force_set_balance(env: BlockEnv, origin: Origin, args: dict[str, Any]) -> None:
    if origin[0] != ROOT:
        raise DispatchFailure(BAD_ORIGIN)
    who, new_free = _lookup(args["who"]), args["new_free"]
    info = account(env, who)
    if not _exists(info):
        _credit(env, who, new_free)
    else:
        _issuance(env, new_free - info["data"]["free"])
        info["data"]["free"] = new_free
        set_account(env, who, info)
        env.deposit("Balances", "BalanceSet", {"who": who, "free": new_free})
        return
    _issuance(env, new_free)
    env.deposit("Balances", "BalanceSet", {"who": who, "free": new_free})


def _sudo(env: BlockEnv, origin: Origin, args: dict[str, Any]) -> None:
    who = _signed(origin)
    if env.config.sudo_key is None or who != env.config.sudo_key:
        raise module_error("Sudo", "RequireSudo")
    saved_state, saved_events = env.state.copy(), len(env.events)
    try:
        dispatch(env, (ROOT, None), args["call"])
        result: Any = ("Ok", ())
    except DispatchFailure as failure:
        env.state, env.events[saved_events:] = saved_state, []
        result = ("Err", failure.error)
    env.deposit("Sudo", "Sudid", {"sudo_result": result})


def _register(env: BlockEnv, origin: Origin, args: dict[str, Any]) -> None:
    who = _signed(origin)
    stake = args["stake"]
    if env.state.get("OperatorStake", "Operators", who) is not None:
        raise module_error("OperatorStake", "AlreadyRegistered")
    if stake < env.config.min_stake:
        raise module_error("OperatorStake", "StakeBelowMinimum")
    info = account(env, who)
    if info["data"]["free"] < stake + EXISTENTIAL_DEPOSIT:
        raise module_error("OperatorStake", "InsufficientBalance")
    info["data"]["free"] -= stake
    info["data"]["reserved"] += stake
    info["consumers"] += 1
    set_account(env, who, info)
    env.deposit("Balances", "Reserved", {"who": who, "amount": stake})
    epoch = env.state.get("OperatorStake", "CurrentEpoch")
    env.state.put(
        "OperatorStake",
        "Operators",
        {
            "stake": stake,
            "attestation_hash": args["attestation_hash"],
            "last_heartbeat_epoch": epoch,
            "registered_at": env.number,
        },
        who,
    )
    env.deposit(
        "OperatorStake",
        "OperatorRegistered",
        {"who": who, "stake": stake, "attestation_hash": args["attestation_hash"]},
    )


def _heartbeat(env: BlockEnv, origin: Origin, args: dict[str, Any]) -> None:
    who = _signed(origin)
    epoch = args["epoch"]
    operator = env.state.get("OperatorStake", "Operators", who)
    if operator is None:
        raise module_error("OperatorStake", "NotRegistered")
    last = operator["last_heartbeat_epoch"]
    if epoch < last:
        raise module_error("OperatorStake", "HeartbeatEpochInPast")
    if epoch - last > env.config.max_heartbeat_epoch_advance:
        raise module_error("OperatorStake", "HeartbeatEpochTooFarAhead")
    operator["last_heartbeat_epoch"] = epoch
    env.state.put("OperatorStake", "Operators", operator, who)
    env.deposit("OperatorStake", "HeartbeatReceived", {"who": who, "epoch": epoch})


def _placeholder(
    pallet: str, field_name: str
) -> Callable[[BlockEnv, Origin, dict[str, Any]], None]:
    def handler(env: BlockEnv, origin: Origin, args: dict[str, Any]) -> None:
        who = _signed(origin)
        call_type = BY_NAME[pallet].call_type
        assert call_type is not None
        encoded = call_type.encode((call_type.variants[0].name, args))
        env.deposit(pallet, "PlaceholderCalled", {"who": who, "call": encoded})

    return handler


HANDLERS: dict[tuple[str, str], Callable[[BlockEnv, Origin, dict[str, Any]], None]] = {
    ("System", "remark"): _remark,
    ("Balances", "transfer_allow_death"): _transfer_allow_death,
    ("Balances", "transfer_keep_alive"): _transfer_keep_alive,
    ("Balances", "force_set_balance"): _force_set_balance,
    ("Sudo", "sudo"): _sudo,
    ("OperatorStake", "register"): _register,
    ("OperatorStake", "heartbeat"): _heartbeat,
}
for _pallet, _call, _field in PLACEHOLDERS:
    HANDLERS[(_pallet, _call)] = _placeholder(_pallet, _field.name or "")


def dispatch(env: BlockEnv, origin: Origin, call: Any) -> None:
    pallet, (name, args) = call
    HANDLERS[(pallet, name)](env, origin, args or {})


def call_weight(call: Any) -> int:
    pallet, (name, args) = call
    weight = next(c.ref_time for c in BY_NAME[pallet].calls if c.name == name)
    if (pallet, name) == ("Sudo", "sudo"):
        weight += call_weight(args["call"])
    return weight

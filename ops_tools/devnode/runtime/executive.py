"""Block execution: initialise, apply extrinsics, finalise, and the state root.

One code path serves the pool (``validate``), local authoring and the import of blocks from the
network, so an authored block and an imported one are executed identically.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ops_tools.chainspec.trie import ordered_trie_root, trie_root
from ops_tools.devnode.runtime import extrinsic as xtmod
from ops_tools.devnode.runtime.definitions import EXISTENTIAL_DEPOSIT
from ops_tools.devnode.runtime.dispatch import (
    SIGNED,
    BlockEnv,
    DispatchFailure,
    call_weight,
    dispatch,
    withdraw_fee,
)
from ops_tools.devnode.runtime.extrinsic import Extrinsic, InvalidTransaction
from ops_tools.devnode.runtime.state import ChainConfig, State, read_config

BlockHashAt = Callable[[int], bytes | None]


@dataclass(frozen=True)
class RuntimeInfo:
    genesis_hash: bytes
    spec_version: int
    transaction_version: int
    state_version: int


def fee_of(config: ChainConfig, xt: Extrinsic) -> int:
    weight_part = config.weight_fee * call_weight(xt.call) // 1_000_000
    return config.base_fee + config.length_fee * xt.length + weight_part + xt.tip


def _dispatch_info(xt: Extrinsic) -> dict[str, Any]:
    return {
        "weight": {"ref_time": call_weight(xt.call), "proof_size": 0},
        "class": "Normal",
        "pays_fee": "Yes",
    }


def validate(
    state: State,
    xt: Extrinsic,
    info: RuntimeInfo,
    block_hash_at: BlockHashAt,
    number: int,
    config: ChainConfig | None = None,
    check_signature: bool = True,
) -> int:
    """Check ``xt`` for inclusion in block ``number`` on ``state``; returns the account nonce.

    A nonce above the account's is allowed here (the pool decides how far ahead it may be).
    """
    if number >= xt.era.death(number):
        raise InvalidTransaction(xtmod.STALE)
    birth = xt.era.birth(number)
    era_hash = block_hash_at(birth) if not xt.era.immortal else info.genesis_hash
    if era_hash is None or birth >= number:
        raise InvalidTransaction(xtmod.ANCIENT)
    if check_signature:
        xt.check_signature(info.spec_version, info.transaction_version, info.genesis_hash, era_hash)
    account = state.get("System", "Account", xt.signer)
    if xt.nonce < account["nonce"]:
        raise InvalidTransaction(xtmod.STALE)
    cfg = config or read_config(state)
    if account["providers"] == 0 or account["data"]["free"] < fee_of(cfg, xt) + EXISTENTIAL_DEPOSIT:
        raise InvalidTransaction(xtmod.PAYMENT)
    return account["nonce"]


@dataclass
class BlockResult:
    state: State
    extrinsics: list[Extrinsic]
    events: list[dict[str, Any]]
    state_root: bytes
    extrinsics_root: bytes
    rejected: list[tuple[Extrinsic, InvalidTransaction]]


def execute_block(
    parent: State,
    *,
    number: int,
    parent_hash: bytes,
    slot: int,
    info: RuntimeInfo,
    extrinsics: list[Extrinsic],
    block_hash_at: BlockHashAt,
    skip_invalid: bool,
    config: ChainConfig | None = None,
) -> BlockResult:
    """Execute a block on ``parent``; bad extrinsics raise unless ``skip_invalid`` (authoring)."""
    state = parent.copy()
    config = config or read_config(state)
    env = BlockEnv(state, number, config)
    state.put("System", "Number", number)
    state.put("System", "ParentHash", parent_hash)
    state.put("Timestamp", "Now", slot * config.slot_duration)
    state.put("Aura", "CurrentSlot", slot)
    state.put("OperatorStake", "CurrentEpoch", number // config.epoch_length)
    applied: list[Extrinsic] = []
    rejected: list[tuple[Extrinsic, InvalidTransaction]] = []
    for xt in extrinsics:
        try:
            _apply(env, xt, len(applied), info, block_hash_at, number, config)
        except InvalidTransaction as exc:
            if not skip_invalid:
                raise
            rejected.append((xt, exc))
            continue
        applied.append(xt)
    env.state.put("System", "Events", env.events)
    env.state.put("System", "EventCount", len(env.events))
    root = trie_root(env.state.data, info.state_version)
    xt_root = ordered_trie_root(
        [x.encoded[_prefix_len(x.encoded) :] for x in applied], info.state_version
    )
    return BlockResult(env.state, applied, env.events, root, xt_root, rejected)


def _prefix_len(encoded: bytes) -> int:
    mode = encoded[0] & 3
    return 1 if mode == 0 else 2 if mode == 1 else 4 if mode == 2 else (encoded[0] >> 2) + 5


def _apply(
    env: BlockEnv,
    xt: Extrinsic,
    index: int,
    info: RuntimeInfo,
    block_hash_at: BlockHashAt,
    number: int,
    config: ChainConfig,
) -> None:
    account_nonce = validate(env.state, xt, info, block_hash_at, number, config)
    if xt.nonce > account_nonce:
        raise InvalidTransaction(xtmod.FUTURE)
    env.phase = ("ApplyExtrinsic", index)
    fee = fee_of(config, xt)
    account = env.state.get("System", "Account", xt.signer)
    account["nonce"] += 1
    env.state.put("System", "Account", account, xt.signer)
    withdraw_fee(env, xt.signer, fee)
    saved_state, saved_events = env.state.copy(), len(env.events)
    error = None
    try:
        dispatch(env, (SIGNED, xt.signer), xt.call)
    except DispatchFailure as failure:
        env.state = saved_state
        del env.events[saved_events:]
        error = failure.error
    env.deposit(
        "TransactionPayment",
        "TransactionFeePaid",
        {"who": xt.signer, "actual_fee": fee, "tip": xt.tip},
    )
    if error is None:
        env.deposit("System", "ExtrinsicSuccess", {"dispatch_info": _dispatch_info(xt)})
    else:
        env.deposit(
            "System",
            "ExtrinsicFailed",
            {"dispatch_error": error, "dispatch_info": _dispatch_info(xt)},
        )


def account_nonce(state: State, who: bytes) -> int:
    return state.get("System", "Account", who)["nonce"]

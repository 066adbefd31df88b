"""Step 7: the on-chain heartbeat for the current epoch (the worker keeps them going after).

The worker started in step 6 heartbeats too, with the same key: the two may race for a nonce
or an epoch. The runtime allows one epoch of advance per heartbeat, so this step sends the next
allowed epoch (last + 1) until the chain's ``last_heartbeat_epoch`` reaches the current epoch,
re-reading both after each heartbeat or refusal: whichever heartbeat lands, the rule holds, and
a registration many epochs behind ends the step current, not behind by the epochs its catching
up took.
"""

from __future__ import annotations

import time

from ops_tools.errors import OpsError
from ops_tools.operator.context import Context
from ops_tools.operator.steps import Outcome, gone, patiently
from ops_tools.wallet import operator
from ops_tools.wallet.errors import ChainRejection

NAME = "heartbeat"
TITLE = "First heartbeat"


def _last(ctx: Context) -> tuple[int, int]:
    substrate = ctx.substrate()
    record = operator.operator_record(substrate, ctx.facts["account"]) or {}
    return int(record.get("last_heartbeat_epoch", -1)), operator.current_epoch(substrate)


def _registration(ctx: Context) -> list | None:
    """The registration the heartbeats are for: its block's number and hash (a block number
    alone repeats on a network re-created from the same spec)."""
    substrate = ctx.substrate()
    record = operator.operator_record(substrate, ctx.facts["account"])
    if not record:
        return None
    number = int(record["registered_at"])
    return [number, substrate.get_block_hash(number)]


def _block(registration: object) -> str:
    if isinstance(registration, list) and len(registration) == 2:
        return f"block {registration[0]} ({str(registration[1])[:10]}…)"
    return "no block the journal knows"


def run(ctx: Context) -> Outcome:
    last, target = _last(ctx)
    ours: list[int] = []
    why = ""
    deadline = time.monotonic() + ctx.options.timeout_s
    while last < target:
        if time.monotonic() > deadline:
            raise OpsError(f"heartbeat: the chain's last heartbeat is epoch {last}, not the"
                           f" current {target}, after {ctx.options.timeout_s:g} s ({why}); see"
                           " the worker's log")
        epoch = last + 1
        try:
            sub = operator.heartbeat(ctx.substrate(), ctx.keypair(), epoch, ctx.options.name)
            if sub.success:
                ours.append(epoch)
            else:  # the worker's heartbeat for this epoch landed first
                why = f"{sub.error_pallet}.{sub.error_name}"
        except ChainRejection as exc:  # the worker's took the nonce first
            why = str(exc)[:200]
            time.sleep(1)
        last, target = _last(ctx)
    who = "ours" if last in ours else "the worker's"
    return Outcome(f"heartbeat for epoch {last} on chain ({who}); the worker keeps them going",
                   {"heartbeat_epoch": last, "heartbeat_epochs_sent": ours,
                    "heartbeat_registration": _registration(ctx)})


def check(ctx: Context) -> str | None:
    """The heartbeat was for the registration the chain has, and the chain's last heartbeat is
    within the epoch rule: one for the current epoch would be accepted. A worker behind it is
    given ``LIVENESS_PATIENCE_S`` to catch up (it steps up by itself after a stall) before this
    step sends heartbeats beside it."""
    substrate, address = ctx.substrate(), ctx.facts["account"]
    if not operator.operator_record(substrate, address):
        return gone(ctx, f"the chain has no registration for {address}, so no heartbeat")
    sent_for, now = ctx.facts.get("heartbeat_registration"), _registration(ctx)
    if sent_for != now:
        return gone(ctx, f"the heartbeat was for the registration in {_block(sent_for)}; the"
                         f" chain's is in {_block(now)}")
    constant = substrate.get_constant(operator.PALLET, "MaxHeartbeatEpochAdvance")
    advance = int(constant.value) if constant is not None else 1

    def within() -> str | None:
        last, current = _last(ctx)
        if current - last <= advance:
            return None
        return (f"the last heartbeat of {address} is epoch {last}, the current epoch {current}:"
                f" more than MaxHeartbeatEpochAdvance ({advance}) behind")

    return patiently(ctx, within)

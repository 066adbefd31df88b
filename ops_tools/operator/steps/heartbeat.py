"""Step 7: the on-chain heartbeat for the current epoch (the worker keeps them going after)."""

from __future__ import annotations

from ops_tools.errors import OpsError
from ops_tools.operator.context import Context
from ops_tools.operator.steps import Outcome
from ops_tools.wallet import operator
from ops_tools.wallet.errors import ChainRejection

NAME = "heartbeat"
TITLE = "First heartbeat"


def _last(ctx: Context) -> tuple[int, int]:
    substrate = ctx.substrate()
    record = operator.operator_record(substrate, ctx.facts["account"]) or {}
    return int(record.get("last_heartbeat_epoch", -1)), operator.current_epoch(substrate)


def run(ctx: Context) -> Outcome:
    last, epoch = _last(ctx)
    if last >= epoch:
        return Outcome(f"heartbeat for epoch {last} already on chain (the worker's)",
                       {"heartbeat_epoch": last})
    try:
        sub = operator.heartbeat(ctx.substrate(), ctx.keypair(), epoch, ctx.options.name)
        ok, why = sub.success, f"{sub.error_pallet}.{sub.error_name}: {sub.remedy}"
    except ChainRejection as exc:  # the worker's own heartbeat took the nonce first
        ok, why = False, str(exc)
    if not ok:
        # The worker heartbeats too; losing the race to it is the outcome we wanted.
        last, now = _last(ctx)
        if last >= epoch:
            return Outcome(f"heartbeat for epoch {last} on chain (the worker's, sent meanwhile)",
                           {"heartbeat_epoch": last})
        raise OpsError(f"heartbeat: {why}; current epoch {now}, last heartbeat {last}")
    return Outcome(f"heartbeat for epoch {epoch} in block {sub.block_number}",
                   {"heartbeat_epoch": epoch, "heartbeat_extrinsic": sub.extrinsic_hash})

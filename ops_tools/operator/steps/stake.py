"""Step 5: OperatorStake::register with the stake and the attestation hash, once."""

from __future__ import annotations

from ops_tools.errors import OpsError
from ops_tools.operator.context import Context
from ops_tools.operator.steps import Outcome, gone
from ops_tools.wallet import operator

NAME = "stake"
TITLE = "Stake bind"


def run(ctx: Context) -> Outcome:
    substrate, address = ctx.substrate(), ctx.facts["account"]
    attestation_hash, stake = ctx.facts["attestation_hash"], int(ctx.facts["stake"])
    record = operator.operator_record(substrate, address)
    if record:
        bound = record.get("attestation_hash")
        note = "" if bound in (None, attestation_hash) else f" (bound attestation {bound})"
        return Outcome(f"already registered: stake {record.get('stake')} since block"
                       f" {record.get('registered_at')}{note}; not registering again",
                       {"registered_stake": str(record.get("stake")),
                        "registered_at": record.get("registered_at"),
                        "registered_attestation_hash": bound or attestation_hash})
    sub = operator.register(substrate, ctx.keypair(), stake, attestation_hash, ctx.options.name)
    if not sub.success:
        why = sub.remedy or sub.error_docs
        raise OpsError(f"stake: {sub.error_pallet}.{sub.error_name}: {why}")
    return Outcome(f"registered with stake {stake} in block {sub.block_number}"
                   f" ({sub.extrinsic_hash})",
                   {"registered_stake": str(stake), "registered_at": sub.block_number,
                    "register_extrinsic": sub.extrinsic_hash,
                    "registered_attestation_hash": attestation_hash})


def check(ctx: Context) -> str | None:
    """``OperatorStake::Operators`` has the account, bound to the journaled attestation hash."""
    address = ctx.facts["account"]
    record = operator.operator_record(ctx.substrate(), address)
    if not record:
        return gone(ctx, f"the chain has no registration for {address}")
    bound = ctx.facts.get("registered_attestation_hash", ctx.facts.get("attestation_hash"))
    if record.get("attestation_hash") != bound:
        return (f"the registration of {address} binds attestation"
                f" {record.get('attestation_hash')}, not the journal's {bound}")
    return None

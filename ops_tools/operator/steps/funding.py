"""Step 3: enough free balance for the stake plus fees, from the faucet when short."""

from __future__ import annotations

import time

from substrateinterface import Keypair, SubstrateInterface

from ops_tools.errors import OpsError
from ops_tools.operator.context import Context
from ops_tools.operator.steps import Outcome, gone
from ops_tools.wallet import faucet_client, operator
from ops_tools.wallet.tokens import format_tokens

NAME = "funding"
TITLE = "Funding"
# Register, then heartbeats for a while: the fee margin kept free beside the stake.
FEE_MARGIN_EXTRINSICS = 50
FALLBACK_FEE_MARGIN = 100_000_000_000  # 0.1 token when the node cannot estimate a fee


def fee_margin(substrate: SubstrateInterface, address: str, stake: int) -> int:
    try:
        call = substrate.compose_call(operator.PALLET, "register",
                                      {"stake": stake, "attestation_hash": "0x" + "00" * 32})
        info = substrate.get_payment_info(call, Keypair(ss58_address=address, ss58_format=42))
        fee = int(info["partial_fee"])
    except Exception:  # an estimate only: a node without the fee API gets the fallback
        return FALLBACK_FEE_MARGIN
    return max(fee * FEE_MARGIN_EXTRINSICS, 1)


def existential_deposit(substrate: SubstrateInterface) -> int:
    value = substrate.get_constant("Balances", "ExistentialDeposit")
    return int(value.value) if value is not None else 0


def needed(ctx: Context) -> tuple[int, int]:
    substrate = ctx.substrate()
    stake = int(ctx.facts["stake"])
    fees = fee_margin(substrate, ctx.facts["account"], stake) + existential_deposit(substrate)
    return stake + fees, fees


def _plancks(value: int) -> str:
    return f"{format_tokens(value)} tokens ({value} plancks)"


def run(ctx: Context) -> Outcome:
    substrate, address = ctx.substrate(), ctx.facts["account"]
    need, fees = needed(ctx)
    free = operator.read_balance(substrate, address).free
    if free >= need:
        return Outcome(f"free balance {_plancks(free)} covers stake and fees; no drip needed",
                       {"funded_free": str(free)})
    url = ctx.options.faucet_url
    ctx.emit(f"asking the faucet {url} for a drip (missing {_plancks(need - free)})")
    try:
        drip = faucet_client.request_drip(url, address, ctx.options.rpc_timeout_s)
    except OpsError as exc:
        raise OpsError(f"funding: {exc}; the account {address} has {_plancks(free)} and needs"
                       f" {_plancks(need)} (stake {ctx.facts['stake']} + fees {fees}):"
                       f" {_plancks(need - free)} missing; transfer it to {address} or ask the"
                       " faucet again when it allows") from None
    # The faucet answers once the drip is in a block; the RPC node may be a block behind.
    deadline = time.monotonic() + 15
    while True:
        free = operator.read_balance(substrate, address).free
        if free >= need:
            break
        if time.monotonic() > deadline:
            raise OpsError(f"funding: after the faucet's drip the account {address} has"
                           f" {_plancks(free)}, needs {_plancks(need)}: {_plancks(need - free)}"
                           f" missing; transfer it to {address} (or lower --stake, at least"
                           " MinStake) and run onboard again")
        time.sleep(1)
    amount = drip.get("amount", {}).get("plancks", "?")
    return Outcome(f"faucet dripped {amount} plancks (block {drip.get('block_number')});"
                   f" free balance {_plancks(free)}",
                   {"funded_free": str(free), "drip_extrinsic": drip.get("extrinsic_hash")})


def check(ctx: Context) -> str | None:
    """The free balance still covers stake and fees, or the stake is already reserved by the
    registration it paid for; else the faucet is asked again."""
    substrate, address = ctx.substrate(), ctx.facts["account"]
    if operator.operator_record(substrate, address):
        return None
    need, _fees = needed(ctx)
    free = operator.read_balance(substrate, address).free
    if free >= need:
        return None
    return gone(ctx, f"the account {address} has {_plancks(free)} and no registration; the stake"
                     f" and fees need {_plancks(need)}")

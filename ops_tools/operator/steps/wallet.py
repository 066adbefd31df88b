"""Step 2: the operator's account in the wallet-cli keystore, created or unlocked."""

from __future__ import annotations

from ops_tools import atomic
from ops_tools.operator.context import Context
from ops_tools.operator.steps import Outcome
from ops_tools.wallet import mnemonic_keys

NAME = "wallet"
TITLE = "Wallet"


def run(ctx: Context) -> Outcome:
    name, keystore = ctx.options.name, ctx.keystore
    if keystore.exists(name):
        keypair = ctx.keypair()  # proves the passphrase before anything uses it
        info = keystore.info(name)
        detail = f"existing account {name!r}: {keypair.ss58_address}"
    else:
        mnemonic = mnemonic_keys.generate_mnemonic(12)
        info = keystore.create(name, mnemonic_keys.keys_from_mnemonic(mnemonic),
                               ctx.passphrase(confirm=True))
        # The only backup of both keys: kept 0600 beside the journal, never printed (the
        # playbook's output and CI logs would keep it); the operator moves it offline.
        backup = ctx.options.secrets_dir / f"{name}.mnemonic"
        atomic.write_text(backup, mnemonic + "\n", mode=0o600)
        detail = (f"created account {name!r}: {info.ss58_address}; mnemonic backup {backup}"
                  " (0600): copy it offline, then delete it")
        ctx.facts["mnemonic_backup"] = str(backup)
    return Outcome(detail, {"account": info.ss58_address, "eth_address": info.eth_address,
                            "keystore": str(keystore.root)})

"""Step 2: the operator's account in the wallet-cli keystore, created or unlocked."""

from __future__ import annotations

from ops_tools import atomic
from ops_tools.errors import InputError
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


def check(ctx: Context) -> str | None:
    """The journaled account is in the keystore and the passphrase opens it. Never redone: a
    new account would silently replace the one the journal (and perhaps the chain) knows."""
    name, keystore, address = ctx.options.name, ctx.keystore, ctx.facts.get("account")
    if not keystore.exists(name):
        backup = ctx.facts.get("mnemonic_backup")
        source = (f"its mnemonic backup ({backup}, or the copy you moved offline)" if backup
                  else "its mnemonic backup")
        raise InputError(
            f"keystore: account {name!r} ({address}), which the journal {ctx.journal.path}"
            f" names, is not in the keystore {keystore.root}; restore it from {source}:"
            f" NET_KEYSTORE={keystore.root} wallet-cli import {name} --mnemonic-file FILE"
            " --passphrase-file F, then run onboard again (or give --keystore the keystore that"
            " holds it); no account was created and nothing was sent to the chain")
    keypair = ctx.keypair()  # a wrong passphrase stops here, before anything is sent
    if keypair.ss58_address != address:
        raise InputError(
            f"keystore: account {name!r} in {keystore.root} is {keypair.ss58_address}, not the"
            f" journal's {address}; restore the journal's account from its mnemonic backup"
            f" (wallet-cli import) into the keystore, or onboard this account with its own"
            f" --state-dir; nothing was sent to the chain")
    return None

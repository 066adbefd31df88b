"""One BIP39 mnemonic -> the sr25519 hotkey and the EVM-bridge key of an operator account.

- sr25519: substrate's derivation (BIP39 entropy -> mini secret, no password), the same as
  ``subkey`` and polkadot.js for a bare mnemonic; ss58 prefix 42.
- EVM: BIP32/BIP44 on the BIP39 seed along m/44'/60'/0'/0/0, the path every Ethereum wallet
  uses for its first account.
"""

from __future__ import annotations

from dataclasses import dataclass

from eth_account import Account
from eth_account.signers.local import LocalAccount
from substrateinterface import Keypair, KeypairType

from ops_tools.chain.keys import SS58_FORMAT
from ops_tools.errors import InputError

ETH_DERIVATION_PATH = "m/44'/60'/0'/0/0"
MNEMONIC_WORD_COUNTS = (12, 15, 18, 21, 24)

# eth-account gates mnemonic support behind this switch; the derivation it enables is the
# standard BIP32/BIP44 one, checked against the well-known test vectors in tests/wallet.
Account.enable_unaudited_hdwallet_features()


@dataclass(frozen=True)
class AccountKeys:
    hotkey: Keypair
    evm: LocalAccount

    @property
    def ss58_address(self) -> str:
        return self.hotkey.ss58_address

    @property
    def eth_address(self) -> str:
        return self.evm.address


def generate_mnemonic(words: int = 12) -> str:
    if words not in MNEMONIC_WORD_COUNTS:
        raise InputError(
            f"--words: {words} is not a BIP39 length; use one of "
            + ", ".join(str(n) for n in MNEMONIC_WORD_COUNTS)
        )
    return Keypair.generate_mnemonic(words)


def normalize_mnemonic(mnemonic: str) -> str:
    """Collapse whitespace and case, so a pasted phrase with line breaks still imports."""
    return " ".join(mnemonic.lower().split())


def keys_from_mnemonic(mnemonic: str) -> AccountKeys:
    phrase = normalize_mnemonic(mnemonic)
    count = len(phrase.split())
    # The message never repeats the phrase: it is a secret.
    if count not in MNEMONIC_WORD_COUNTS:
        raise InputError(
            f"mnemonic: has {count} words, a BIP39 mnemonic has 12, 15, 18, 21 or 24; check the"
            " phrase"
        )
    if not Keypair.validate_mnemonic(phrase):
        raise InputError(
            f"mnemonic: the {count} words are not a valid English BIP39 mnemonic (unknown word or"
            " bad checksum); check the phrase"
        )
    hotkey = Keypair.create_from_mnemonic(
        phrase, ss58_format=SS58_FORMAT, crypto_type=KeypairType.SR25519
    )
    evm = Account.from_mnemonic(phrase, account_path=ETH_DERIVATION_PATH)
    return AccountKeys(hotkey=hotkey, evm=evm)

"""The keystore directory: one account per name, two encrypted files per account.

- ``<name>.sr25519.json``: the hotkey as a polkadot-js keystore JSON (scrypt + xsalsa20-poly1305,
  PKCS8 sr25519), what polkadot.js "Restore from JSON" imports;
- ``<name>.eth.json``: the EVM-bridge key as an Ethereum keystore v3 JSON (scrypt + AES-128-CTR),
  what geth, MetaMask and eth-account import.

Both are encrypted with the same passphrase. The mnemonic is not stored: both keys are kept
instead, so the account works without it, and the mnemonic stays the only backup. Files are
written atomically with mode 0600 in a directory created with mode 0700.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils import to_checksum_address
from substrateinterface import Keypair

from ops_tools import atomic
from ops_tools.chain.keys import SS58_FORMAT
from ops_tools.errors import InputError, OpsError
from ops_tools.wallet import inputs
from ops_tools.wallet.mnemonic_keys import AccountKeys

KEYSTORE_ENV = "NET_KEYSTORE"
SR25519_SUFFIX = ".sr25519.json"
ETH_SUFFIX = ".eth.json"


def default_keystore_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$NET_KEYSTORE``, else ``$XDG_DATA_HOME/net/wallet``, else ``~/.local/share/net/wallet``."""
    env = os.environ if env is None else env
    if env.get(KEYSTORE_ENV):
        return Path(env[KEYSTORE_ENV]).expanduser()
    if env.get("XDG_DATA_HOME"):
        return Path(env["XDG_DATA_HOME"]).expanduser() / "net" / "wallet"
    return Path.home() / ".local" / "share" / "net" / "wallet"


@dataclass(frozen=True)
class AccountInfo:
    name: str
    ss58_address: str
    eth_address: str
    sr25519_path: Path
    eth_path: Path

    def to_json(self) -> dict[str, str]:
        return {
            "name": self.name,
            "ss58_address": self.ss58_address,
            "eth_address": self.eth_address,
            "sr25519_keystore": str(self.sr25519_path),
            "eth_keystore": str(self.eth_path),
        }


class Keystore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def sr25519_path(self, name: str) -> Path:
        return self.root / f"{name}{SR25519_SUFFIX}"

    def eth_path(self, name: str) -> Path:
        return self.root / f"{name}{ETH_SUFFIX}"

    def names(self) -> list[str]:
        if not self.root.is_dir():
            return []
        found: set[str] = set()
        for entry in self.root.iterdir():
            for suffix in (SR25519_SUFFIX, ETH_SUFFIX):
                if entry.name.endswith(suffix) and not entry.name.startswith("."):
                    found.add(entry.name[: -len(suffix)])
        return sorted(found)

    def exists(self, name: str) -> bool:
        return self.sr25519_path(name).exists() or self.eth_path(name).exists()

    def create(self, name: str, keys: AccountKeys, passphrase: str) -> AccountInfo:
        """Write both files of a new account; on any failure neither is left behind."""
        inputs.account_name(name)
        if self.exists(name):
            raise InputError(
                f"account name: {name!r} already exists in {self.root}; choose another name"
                " (nothing was written)"
            )
        if not passphrase:
            raise InputError(
                "passphrase: empty; choose a non-empty passphrase (nothing was written)"
            )
        sr_doc = keys.hotkey.export_to_encrypted_json(passphrase, name)
        eth_doc = Account.encrypt(keys.evm.key, passphrase)
        self._ensure_dir()
        written: list[Path] = []
        try:
            for path, doc in ((self.eth_path(name), eth_doc), (self.sr25519_path(name), sr_doc)):
                atomic.write_bytes(path, _dump(doc), mode=0o600)
                written.append(path)
        except BaseException:
            for path in written:
                path.unlink(missing_ok=True)
            raise
        return self.info(name)

    def info(self, name: str) -> AccountInfo:
        """Addresses from the clear-text fields of both files; no passphrase needed."""
        self._require(name)
        sr_doc = self._load(self.sr25519_path(name))
        eth_doc = self._load(self.eth_path(name))
        try:
            ss58 = str(sr_doc["address"])
            eth = to_checksum_address("0x" + str(eth_doc["address"]).removeprefix("0x"))
        except (KeyError, ValueError) as exc:
            raise OpsError(
                f"keystore: account {name!r} has a malformed file in {self.root} ({exc});"
                " restore it from a backup or re-import the mnemonic under a new name"
            ) from exc
        return AccountInfo(name, ss58, eth, self.sr25519_path(name), self.eth_path(name))

    def unlock_hotkey(self, name: str, passphrase: str) -> Keypair:
        self._require(name)
        path = self.sr25519_path(name)
        doc = self._load(path)
        try:
            keypair = Keypair.create_from_encrypted_json(doc, passphrase, ss58_format=SS58_FORMAT)
        except Exception as exc:  # nacl CryptoError on a wrong passphrase; others on corruption
            raise _wrong_passphrase(name, path) from exc
        if keypair.ss58_address != doc.get("address"):
            raise OpsError(
                f"keystore: {path} decrypts to {keypair.ss58_address}, not the address it declares"
                f" ({doc.get('address')}); the file is corrupt, re-import the mnemonic"
            )
        return keypair

    def unlock_evm(self, name: str, passphrase: str) -> LocalAccount:
        self._require(name)
        path = self.eth_path(name)
        doc = self._load(path)
        try:
            return Account.from_key(Account.decrypt(doc, passphrase))
        except ValueError as exc:  # "MAC mismatch" on a wrong passphrase
            raise _wrong_passphrase(name, path) from exc

    def _require(self, name: str) -> None:
        inputs.account_name(name)
        sr, eth = self.sr25519_path(name), self.eth_path(name)
        if not sr.exists() and not eth.exists():
            raise InputError(
                f"account name: {name!r} not found in keystore {self.root}; `wallet-cli list`"
                " shows the accounts, `wallet-cli new` or `import` creates one"
            )
        missing = [p for p in (sr, eth) if not p.exists()]
        if missing:
            raise OpsError(
                f"keystore: account {name!r} is incomplete, {missing[0]} is missing; restore it"
                " from a backup or re-import the mnemonic under a new name"
            )

    def _load(self, path: Path) -> dict[str, Any]:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise OpsError(f"keystore: cannot read {path}: {exc}") from exc
        if not isinstance(doc, dict):
            raise OpsError(f"keystore: {path} is not a JSON object")
        return doc

    def _ensure_dir(self) -> None:
        if not self.root.exists():
            self.root.mkdir(mode=0o700, parents=True)
            # mkdir's mode is filtered by the umask; the keystore must be private regardless.
            self.root.chmod(0o700)


def _wrong_passphrase(name: str, path: Path) -> InputError:
    return InputError(
        f"passphrase: wrong passphrase for account {name!r} ({path} did not decrypt); give the"
        " passphrase the account was created with"
    )


def _dump(doc: Mapping[str, Any]) -> bytes:
    return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode("utf-8")

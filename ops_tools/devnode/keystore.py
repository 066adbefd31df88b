"""A keystore laid out as Substrate's: one file per key, named hex(key type) + hex(public key),
holding the secret URI as a JSON string; files are mode 0600."""

from __future__ import annotations

import json
from pathlib import Path

from ops_tools.atomic import write_text
from ops_tools.devnode.crypto import KeyPair, keypair_from_suri
from ops_tools.errors import InputError

KEY_TYPES = {
    "aura": "Sr25519",
    "gran": "Ed25519",
    "babe": "Sr25519",
    "imon": "Sr25519",
    "audi": "Sr25519",
}


def check_key_type(key_type: str) -> None:
    if len(key_type.encode()) != 4:
        raise InputError(
            f"--key-type {key_type!r}: a key type is 4 ASCII characters, e.g. aura or gran"
        )


class Keystore:
    def __init__(self, path: Path) -> None:
        self.path = path

    def insert(self, key_type: str, suri: str, scheme: str) -> KeyPair:
        check_key_type(key_type)
        pair = keypair_from_suri(suri, scheme)
        self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
        name = key_type.encode().hex() + pair.public.hex()
        write_text(self.path / name, json.dumps(suri), mode=0o600)
        return pair

    def publics(self, key_type: str) -> list[bytes]:
        prefix = key_type.encode().hex()
        if not self.path.is_dir():
            return []
        out = []
        for f in sorted(self.path.iterdir()):
            if f.name.startswith(prefix) and len(f.name) == 8 + 64:
                try:
                    out.append(bytes.fromhex(f.name[8:]))
                except ValueError:
                    continue
        return out

    def has(self, key_type: str, public: bytes) -> bool:
        return (self.path / (key_type.encode().hex() + public.hex())).is_file()

    def pair(self, key_type: str, public: bytes, scheme: str) -> KeyPair | None:
        f = self.path / (key_type.encode().hex() + public.hex())
        try:
            suri = json.loads(f.read_text())
        except (OSError, ValueError):
            return None
        pair = keypair_from_suri(suri, scheme)
        return pair if pair.public == public else None

"""Keys from secret URIs (``//Alice``, phrases, hex seeds), signing, verification, ss58.

Derivation follows ``sp_core``: the mnemonic's BIP39 mini-secret, then hard (``//``) and soft
(``/``) junctions whose chain code is the SCALE encoding of the junction padded to 32 bytes;
sr25519 derives with schnorrkel (py-sr25519-bindings), ed25519 hard derivation is
``blake2_256(("Ed25519HDKD", seed, chain_code))``. Deliberately free of substrate-interface,
whose import alone takes most of a second at every CLI start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import bip39
import ed25519_zebra
import sr25519
from scalecodec.utils.ss58 import ss58_decode, ss58_encode

from ops_tools.chainspec.hashing import blake2_256
from ops_tools.chainspec.scale import encode_str
from ops_tools.errors import InputError

DEV_PHRASE = "bottom drive obey lake curtain smoke basket hold race lonely fit walk"
SCHEMES = ("Sr25519", "Ed25519")
_SURI = re.compile(r"^(?P<phrase>[^/]*)(?P<path>(//?[^/]+)*)(///(?P<password>.*))?$")
_JUNCTION = re.compile(r"(//?)([^/]+)")


@dataclass(frozen=True)
class KeyPair:
    scheme: str
    public: bytes
    secret: bytes  # sr25519: 64-byte secret key; ed25519: 32-byte seed

    def sign(self, message: bytes) -> bytes:
        if self.scheme == "Sr25519":
            return sr25519.sign((self.public, self.secret), message)
        return ed25519_zebra.ed_sign(self.secret, message)


def verify(scheme: str, signature: bytes, message: bytes, public: bytes) -> bool:
    try:
        if scheme == "Sr25519":
            return bool(sr25519.verify(signature, message, public))
        return bool(ed25519_zebra.ed_verify(signature, message, public))
    except (ValueError, TypeError, OverflowError):
        return False


def _junctions(path: str) -> list[tuple[bool, bytes]]:
    parts = _JUNCTION.findall(path)
    if "".join(a + b for a, b in parts) != path:
        raise InputError("secret URI: malformed derivation path")
    out = []
    for sep, name in parts:
        code = int(name).to_bytes(8, "little") if name.isdigit() else encode_str(name)
        code = blake2_256(code) if len(code) > 32 else code.ljust(32, b"\0")
        out.append((sep == "//", code))
    return out


def _seed(phrase: str) -> bytes:
    if phrase.startswith("0x"):
        try:
            seed = bytes.fromhex(phrase[2:])
        except ValueError:
            raise InputError("secret URI: the seed after 0x is not hex") from None
        if len(seed) != 32:
            raise InputError(f"secret URI: a hex seed must be 32 bytes, got {len(seed)}")
        return seed
    try:
        return bytes(bip39.bip39_to_mini_secret(phrase, "", "en"))[:32]
    except Exception:  # the binding raises a bare ValueError-like type for a bad phrase
        raise InputError("secret URI: not a valid BIP39 phrase (or 0x seed)") from None


def keypair_from_suri(suri: str, scheme: str) -> KeyPair:
    """Derive a key pair; errors never echo the secret itself."""
    suri = suri.strip()
    if suri.startswith("/"):
        suri = DEV_PHRASE + suri
    match = _SURI.match(suri)
    if not suri or not match or not match["phrase"]:
        raise InputError("secret URI is empty or malformed; give a phrase, 0x seed or //Name")
    if match["password"]:
        raise InputError("secret URI: passwords (///...) are not supported by the development node")
    seed = _seed(match["phrase"].strip())
    junctions = _junctions(match["path"] or "")
    if scheme == "Ed25519":
        for hard, code in junctions:
            if not hard:
                raise InputError(
                    "secret URI: ed25519 keys allow only hard derivation (//), not soft (/)"
                )
            seed = blake2_256(encode_str("Ed25519HDKD") + seed + code)
        _, public = ed25519_zebra.ed_from_seed(seed)
        return KeyPair("Ed25519", bytes(public), seed)
    public, secret = sr25519.pair_from_seed(seed)
    for hard, code in junctions:
        derive = sr25519.hard_derive_keypair if hard else sr25519.derive_keypair
        _, public, secret = derive((code, public, secret), b"")
    return KeyPair("Sr25519", bytes(public), bytes(secret))


def ss58(public: bytes, prefix: int = 42) -> str:
    return ss58_encode(public, prefix)


def account_from_ss58(text: object, what: str) -> bytes:
    if not isinstance(text, str):
        raise InputError(f"{what}: expected an ss58 address string, got {type(text).__name__}")
    try:
        raw = bytes.fromhex(ss58_decode(text))
    except (ValueError, TypeError):
        raw = b""
    if len(raw) != 32:
        raise InputError(f"{what}: {text!r} is not a valid ss58 address")
    return raw

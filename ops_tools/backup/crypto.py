"""The backup's encryption: a key from the passphrase with scrypt, the archive sealed with
AES-256-GCM (``cryptography``). Pure: bytes in, bytes out.

Sealed layout: ``MAGIC | log2(n) | r | p | salt (16) | nonce (12) | ciphertext + tag``. The
header is the associated data, so a changed cost parameter or salt fails the tag as a changed
byte of the ciphertext does. The cost parameters are read from a file an attacker may have
written: they are bounded before scrypt runs (a huge ``n`` would be a memory bomb).
"""

from __future__ import annotations

import os
import struct

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from ops_tools.errors import InputError, OpsError

MAGIC = b"NETBKP01"
HEADER = struct.Struct(">8sBBB16s12s")
# OWASP's scrypt recommendation: 2^17 x 8 x 1 (128 MiB, under a second here).
LOG2_N, R, P = 17, 8, 1
# What a sealed file may ask for: at most 2^18 x 8 (256 MiB of memory), at least 2^14.
LOG2_N_RANGE, R_RANGE, P_RANGE = (14, 18), (1, 8), (1, 4)
MIN_PASSPHRASE_CHARS = 12
# AES-GCM as cryptography exposes it takes at most 2^31 - 1 bytes in one call.
MAX_PLAINTEXT_BYTES = 1 << 30


class DecryptError(OpsError):
    """Wrong passphrase, or the sealed file was altered."""


def check_passphrase(passphrase: str, source: str) -> bytes:
    if len(passphrase) < MIN_PASSPHRASE_CHARS:
        raise InputError(
            f"--passphrase-file {source}: the passphrase has {len(passphrase)} characters; use"
            f" at least {MIN_PASSPHRASE_CHARS} (a few random words)"
        )
    return passphrase.encode("utf-8")


def _key(passphrase: bytes, salt: bytes, log2_n: int, r: int, p: int) -> bytes:
    return Scrypt(salt=salt, length=32, n=1 << log2_n, r=r, p=p).derive(passphrase)


def seal(plaintext: bytes, passphrase: bytes, *, log2_n: int | None = None, r: int = R,
         p: int = P) -> bytes:
    log2_n = LOG2_N if log2_n is None else log2_n
    if len(plaintext) > MAX_PLAINTEXT_BYTES:
        raise OpsError(f"the backup holds {len(plaintext)} bytes, more than the"
                       f" {MAX_PLAINTEXT_BYTES} one archive may hold")
    salt, nonce = os.urandom(16), os.urandom(12)
    header = HEADER.pack(MAGIC, log2_n, r, p, salt, nonce)
    return header + AESGCM(_key(passphrase, salt, log2_n, r, p)).encrypt(nonce, plaintext, header)


def open_sealed(sealed: bytes, passphrase: bytes, what: str) -> bytes:
    """The plaintext, or an error naming ``what`` when the passphrase or the file is wrong."""
    if len(sealed) < HEADER.size + 16:
        raise DecryptError(f"{what}: {len(sealed)} bytes, too short to be a sealed backup")
    magic, log2_n, r, p, salt, nonce = HEADER.unpack_from(sealed)
    if magic != MAGIC:
        raise DecryptError(f"{what}: not a NET backup archive (magic {magic!r}, expected"
                           f" {MAGIC!r})")
    for name, value, (low, high) in (("log2(n)", log2_n, LOG2_N_RANGE), ("r", r, R_RANGE),
                                     ("p", p, P_RANGE)):
        if not low <= value <= high:
            raise DecryptError(f"{what}: scrypt {name} = {value} is outside {low}..{high};"
                               " the file was altered or is not from ops-tools backup")
    key = _key(passphrase, salt, log2_n, r, p)
    try:
        return AESGCM(key).decrypt(nonce, sealed[HEADER.size:], sealed[:HEADER.size])
    except InvalidTag:
        raise DecryptError(
            f"{what}: authentication failed: wrong passphrase, or the file was altered;"
            " nothing was restored. Check --passphrase-file, or use another copy of the backup"
        ) from None

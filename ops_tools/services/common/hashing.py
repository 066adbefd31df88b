"""Salted hashes: how services store addresses and IPs they must compare but not keep."""

from __future__ import annotations

import hashlib


def salted_hash(salt: bytes, value: str) -> str:
    """Keyed BLAKE2b (32 bytes, hex): equal values compare equal under one salt, and nobody
    without the salt can test a guess against the stored hash."""
    return hashlib.blake2b(value.encode("utf-8"), key=salt, digest_size=32).hexdigest()

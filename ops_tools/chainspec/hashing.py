"""The hashers Substrate uses for storage keys and for block and trie hashing."""

from __future__ import annotations

import hashlib

import xxhash


def blake2_256(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=32).digest()


def blake2_128(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def blake2_64(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=8).digest()


def twox_64(data: bytes) -> bytes:
    return xxhash.xxh64_intdigest(data, seed=0).to_bytes(8, "little")


def twox_128(data: bytes) -> bytes:
    return twox_64(data) + xxhash.xxh64_intdigest(data, seed=1).to_bytes(8, "little")


def twox_256(data: bytes) -> bytes:
    return b"".join(xxhash.xxh64_intdigest(data, seed=s).to_bytes(8, "little") for s in range(4))


def blake2_128_concat(data: bytes) -> bytes:
    return blake2_128(data) + data


def twox_64_concat(data: bytes) -> bytes:
    return twox_64(data) + data


def identity(data: bytes) -> bytes:
    return data


# Storage map hashers by the names FRAME metadata gives them.
STORAGE_HASHERS = {
    "Blake2_128": blake2_128,
    "Blake2_256": blake2_256,
    "Blake2_128Concat": blake2_128_concat,
    "Twox128": twox_128,
    "Twox256": twox_256,
    "Twox64Concat": twox_64_concat,
    "Identity": identity,
}


def storage_prefix(pallet: str, item: str) -> bytes:
    """The 32-byte prefix of a FRAME storage item: twox128(pallet) ++ twox128(item)."""
    return twox_128(pallet.encode()) + twox_128(item.encode())

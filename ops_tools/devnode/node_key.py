"""The node's network identity: an ed25519 key and its libp2p peer id (``12D3KooW...``)."""

from __future__ import annotations

import os
from pathlib import Path

import ed25519_zebra

from ops_tools.atomic import write_bytes
from ops_tools.chainspec import keys
from ops_tools.errors import InputError


def public_of(secret: bytes) -> bytes:
    return bytes(ed25519_zebra.ed_public_from_secret(secret))


def peer_id(public: bytes) -> str:
    return keys.peer_id_from_public(public)


def public_from_peer_id(text: str) -> bytes:
    try:
        return keys.public_from_peer_id(text)
    except keys.InvalidKey as exc:
        raise InputError(f"peer id {text!r} {exc}") from None


def generate() -> bytes:
    return os.urandom(32)


def read_key_file(path: Path) -> bytes:
    """A node key file holds the secret as 64 hex digits or as 32 raw bytes."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"node key file {path}: no such file") from None
    except OSError as exc:
        raise InputError(f"node key file {path}: cannot read it: {exc.strerror}") from None
    if len(raw) == 32:
        return raw
    text = raw.strip().decode("ascii", errors="replace").removeprefix("0x")
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        secret = b""
    if len(secret) != 32:
        raise InputError(
            f"node key file {path}: expected 32 raw bytes or 64 hex digits (an ed25519 secret)"
        )
    return secret


def write_key_file(path: Path, secret: bytes, binary: bool) -> None:
    write_bytes(path, secret if binary else secret.hex().encode(), mode=0o600)

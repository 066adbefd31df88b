"""The backup's manifest: what each member is (kind, host, size, sha256) and which network it
came from. Pure: the same checks run on the plaintext copy beside the archive (read before
anything is decrypted) and on the authenticated copy inside it.

Member names come from a file an attacker may have written: each is checked here before any
other code sees it (no absolute path, no ``..``, no empty or dot component, no backslash or
control character, bounded length), and restore never builds a path from a name: it maps
``(kind, host)`` to the place the current deployment keeps that thing.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ops_tools.errors import OpsError

FORMAT = "net-backup/1"
KINDS = ("node_key", "keystore", "database", "release")
MAX_NAME_CHARS = 255
MAX_MEMBERS = 10_000
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
_COMPONENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_GENESIS = re.compile(r"^0x[0-9a-f]{64}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class ManifestError(OpsError):
    """The manifest, or the archive it describes, is not what ops-tools backup writes."""


def check_name(name: str) -> str:
    """``name`` as a relative path of safe components, or ManifestError."""
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS:
        raise ManifestError(f"archive member name {name!r}: empty or longer than"
                            f" {MAX_NAME_CHARS} characters")
    parts = name.split("/")
    if name.startswith("/") or any(not _COMPONENT.match(p) or p in (".", "..") for p in parts):
        raise ManifestError(f"archive member name {name!r}: not a plain relative path (absolute,"
                            " '..', an empty component or an unexpected character); refusing"
                            " the archive")
    return name


def check_component(value: str, what: str) -> str:
    """A host name or file name that becomes one component of a member name."""
    if not isinstance(value, str) or not _COMPONENT.match(value):
        raise ManifestError(f"{what} {value!r}: expected letters, digits, '.', '_' or '-'")
    return value


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Member:
    name: str
    kind: str
    host: str | None
    data: bytes = field(repr=False)
    # What restore needs besides the bytes: the database engine, the release's sums.
    meta: dict[str, Any] = field(default_factory=dict)

    def entry(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "host": self.host,
                "size": len(self.data), "sha256": sha256(self.data), "meta": self.meta}


def build(members: list[Member], network: dict[str, str], inventory: str,
          created_at: str) -> dict[str, Any]:
    names = [m.name for m in members]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise ManifestError(f"two members share a name: {twice}")
    return {"format": FORMAT, "created_at": created_at, "inventory": inventory,
            "network": dict(network), "members": [m.entry() for m in members]}


def dumps(manifest: dict[str, Any]) -> bytes:
    return (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()


def parse(raw: bytes, what: str) -> dict[str, Any]:
    """A manifest read back: bounded, well-formed, every name and sum checked."""
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ManifestError(f"{what}: {len(raw)} bytes, more than a manifest may hold"
                            f" ({MAX_MANIFEST_BYTES}); refusing it")
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{what}: not JSON ({exc}); the backup is damaged") from None
    found = data.get("format") if isinstance(data, dict) else None
    if found != FORMAT:
        raise ManifestError(f"{what}: format {found!r} is not {FORMAT!r}; not a backup of this"
                            " version of ops-tools")
    network = data.get("network")
    if not isinstance(network, dict) or not _GENESIS.match(str(network.get("genesis_hash"))):
        raise ManifestError(f"{what}: network.genesis_hash is missing or malformed")
    members = data.get("members")
    if not isinstance(members, list) or len(members) > MAX_MEMBERS:
        raise ManifestError(f"{what}: members must be a list of at most {MAX_MEMBERS}")
    seen: set[str] = set()
    for entry in members:
        if not isinstance(entry, dict):
            raise ManifestError(f"{what}: a member is not a mapping")
        name = check_name(entry.get("name"))  # type: ignore[arg-type]
        if name in seen:
            raise ManifestError(f"{what}: member {name!r} appears twice")
        seen.add(name)
        if entry.get("kind") not in KINDS:
            raise ManifestError(f"{what}: member {name!r} has kind {entry.get('kind')!r}, not"
                                f" one of {', '.join(KINDS)}")
        host = entry.get("host")
        if host is not None:
            check_component(host, f"{what}: member {name!r}'s host")
        if not _SHA256.match(str(entry.get("sha256"))) or not isinstance(entry.get("size"), int):
            raise ManifestError(f"{what}: member {name!r} lacks its size or sha256")
        if not isinstance(entry.get("meta", {}), dict):
            raise ManifestError(f"{what}: member {name!r}'s meta is not a mapping")
    return data

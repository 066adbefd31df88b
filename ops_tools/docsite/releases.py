"""The release index: which genesis the network serves now and which ones it replaced.

Pure logic: the store (``store.py``) reads and writes it. A release is named by its genesis
hash; publishing a genesis makes it the current release and marks the one before it replaced
(with the genesis that replaced it). Publishing the current genesis again only refreshes its
files (a new node binary on the same genesis keeps the release and its URLs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ops_tools.errors import InputError

SCHEMA = 1
GENESIS_RE = re.compile(r"^0x[0-9a-f]{64}$")
CURRENT = "current"
REPLACED = "replaced"


def check_genesis(value: object, what: str) -> str:
    if not isinstance(value, str) or not GENESIS_RE.match(value):
        raise InputError(
            f"{what}: {value!r} is not a genesis hash (0x and 64 lowercase hex digits)"
        )
    return value


@dataclass(frozen=True)
class Published:
    """What one publication changed."""

    changed: bool
    current: dict[str, Any]
    replaced: dict[str, Any] | None


def empty_index() -> dict[str, Any]:
    return {"schema": SCHEMA, "releases": []}


def check_index(index: object, where: str) -> dict[str, Any]:
    if (
        not isinstance(index, dict)
        or index.get("schema") != SCHEMA
        or not isinstance(index.get("releases"), list)
    ):
        raise InputError(
            f"{where}: not a release index of schema {SCHEMA} (an object with 'releases');"
            " restore it or publish into an empty store"
        )
    for i, release in enumerate(index["releases"]):
        check_genesis(release.get("genesis_hash"), f"{where}: releases[{i}].genesis_hash")
    return index


def current_release(index: dict[str, Any]) -> dict[str, Any] | None:
    return next((r for r in index["releases"] if r.get("status") == CURRENT), None)


def publish(index: dict[str, Any], release: dict[str, Any], now: str) -> tuple[dict, Published]:
    """The index with ``release`` current; ``now`` (ISO 8601, UTC) dates the change.

    ``release`` holds genesis_hash, files and the other fields of its page; ``published_at`` is
    set here. The new index lists releases newest first.
    """
    genesis = check_genesis(release.get("genesis_hash"), "release.genesis_hash")
    releases = [dict(r) for r in index["releases"]]
    current = current_release({"releases": releases})
    if current is not None and current["genesis_hash"] == genesis:
        refreshed = {**current, **release, "published_at": current["published_at"]}
        if refreshed == current:
            return index, Published(False, current, None)
        if release.get("files") != current.get("files"):
            refreshed["updated_at"] = now
        releases[releases.index(current)] = refreshed
        return {**index, "releases": releases}, Published(True, refreshed, None)
    replaced = None
    if current is not None:
        replaced = {**current, "status": REPLACED, "replaced_at": now, "replaced_by": genesis}
        releases[releases.index(current)] = replaced
    # A genesis that comes back (a revert) is a new publication: its old entry goes.
    releases = [r for r in releases if r["genesis_hash"] != genesis]
    entry = {**release, "status": CURRENT, "published_at": now}
    entry.pop("replaced_at", None)
    entry.pop("replaced_by", None)
    return {**index, "releases": [entry, *releases]}, Published(True, entry, replaced)

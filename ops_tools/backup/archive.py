"""The members packed into one tar in memory, and read back from an untrusted one.

Reading never extracts: each tar member is checked (a regular file, a safe name, within the
size bounds, listed in the manifest with the same sha256) and its bytes kept in memory; what
is written afterwards goes where the deployment keeps it, not where a name points.
"""

from __future__ import annotations

import io
import tarfile

from ops_tools.backup.manifest import (
    MAX_MEMBERS,
    ManifestError,
    check_name,
    sha256,
)

INNER_MANIFEST = "manifest.json"
# One archive is sealed in one AES-GCM call (crypto.MAX_PLAINTEXT_BYTES) and held in memory.
MAX_MEMBER_BYTES = 1 << 30


def pack(files: dict[str, bytes]) -> bytes:
    """A tar of ``files`` (name -> bytes), in name order, with no owner, time or mode of this
    machine in it."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(check_name(name))
            info.size = len(files[name])
            info.mode = 0o600
            tar.addfile(info, io.BytesIO(files[name]))
    return out.getvalue()


def unpack(raw: bytes, what: str) -> dict[str, bytes]:
    """Name -> bytes of every member of the tar ``raw``; refuses links, devices, directories,
    unsafe names, duplicates and members over the bounds."""
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
            for count, info in enumerate(tar, start=1):
                if count > MAX_MEMBERS + 1:
                    raise ManifestError(f"{what}: more than {MAX_MEMBERS} members; refusing it")
                name = check_name(info.name)
                if not info.isreg():
                    raise ManifestError(f"{what}: member {name!r} is not a regular file (a link,"
                                        " a directory or a device); refusing the archive")
                if info.size > MAX_MEMBER_BYTES:
                    raise ManifestError(f"{what}: member {name!r} has {info.size} bytes, more"
                                        f" than {MAX_MEMBER_BYTES}; refusing it")
                if name in files:
                    raise ManifestError(f"{what}: member {name!r} appears twice")
                fh = tar.extractfile(info)
                assert fh is not None  # a regular file always has one
                files[name] = fh.read(info.size)
    except tarfile.TarError as exc:
        raise ManifestError(f"{what}: not a readable tar ({exc}); the backup is damaged") from None
    return files


def check_members(files: dict[str, bytes], entries: list[dict], what: str) -> None:
    """Every manifest entry present with its size and sha256, nothing else in the archive."""
    listed = {e["name"] for e in entries}
    extra = sorted(set(files) - listed - {INNER_MANIFEST})
    if extra:
        raise ManifestError(f"{what}: members {extra} are not in the manifest; refusing it")
    for entry in entries:
        data = files.get(entry["name"])
        if data is None:
            raise ManifestError(f"{what}: member {entry['name']!r} of the manifest is missing")
        if len(data) != entry["size"] or sha256(data) != entry["sha256"]:
            raise ManifestError(f"{what}: member {entry['name']!r} has sha256 {sha256(data)},"
                                f" the manifest says {entry['sha256']}; refusing the archive")

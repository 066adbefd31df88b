"""A backup on disk: a directory with ``manifest.json`` (the sums, readable without the
passphrase) and ``archive.tar.enc`` (the members and the same manifest, sealed). Written into
a staged directory renamed into place, so a failed backup leaves nothing; read with bounds and
checked in full (sums, tag, names) before restore touches anything."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ops_tools.backup import archive, crypto
from ops_tools.backup import manifest as mf
from ops_tools.checksums import sha256_file
from ops_tools.errors import InputError

MANIFEST = "manifest.json"
ARCHIVE = "archive.tar.enc"
MAX_SEALED_BYTES = crypto.MAX_PLAINTEXT_BYTES + crypto.HEADER.size + 16


def write(out: Path, manifest: dict[str, Any], files: dict[str, bytes],
          passphrase: bytes) -> Path:
    """Seal ``files`` and ``manifest`` into the new directory ``out``; all or nothing."""
    if out.exists() or out.is_symlink():
        raise InputError(f"--out {out}: already exists; a backup never overwrites another."
                         " Name a new directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    sealed = crypto.seal(archive.pack({**files, archive.INNER_MANIFEST: mf.dumps(manifest)}),
                         passphrase)
    scratch = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        os.chmod(scratch, 0o700)
        _write_private(scratch / ARCHIVE, sealed)
        outer = {**manifest, "archive": {"file": ARCHIVE, "size": len(sealed),
                                         "sha256": mf.sha256(sealed)}}
        _write_private(scratch / MANIFEST, mf.dumps(outer))
        # rename(2) onto a name that appeared meanwhile fails for a non-empty directory
        os.rename(scratch, out)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return out


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


@dataclass(frozen=True)
class Verified:
    """A backup whose sums, tag and names all checked out."""

    path: Path
    manifest: dict[str, Any]
    files: dict[str, bytes]

    @property
    def network(self) -> dict[str, str]:
        return self.manifest["network"]

    @property
    def members(self) -> list[dict[str, Any]]:
        return self.manifest["members"]


def _read_bounded(path: Path, limit: int, what: str) -> bytes:
    try:
        with path.open("rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise InputError(f"--from {path.parent}: cannot read {path.name} ({exc.strerror});"
                         " point it at a directory ops-tools backup wrote") from None
    if len(data) > limit:
        raise mf.ManifestError(f"{what}: larger than {limit} bytes; refusing it")
    return data


def read(src: Path, passphrase: bytes) -> Verified:
    outer = mf.parse(_read_bounded(src / MANIFEST, mf.MAX_MANIFEST_BYTES, f"{src}/{MANIFEST}"),
                     f"{src}/{MANIFEST}")
    sealed_path = src / ARCHIVE
    recorded = outer.get("archive") or {}
    if not (sealed_path.is_file() and not sealed_path.is_symlink()):
        raise InputError(f"--from {src}: no {ARCHIVE}; point it at a directory ops-tools backup"
                         " wrote")
    size = sealed_path.stat().st_size
    if size > MAX_SEALED_BYTES or size != recorded.get("size"):
        raise mf.ManifestError(f"{sealed_path}: {size} bytes, the manifest says"
                               f" {recorded.get('size')} (at most {MAX_SEALED_BYTES}); the file"
                               " is damaged or was altered")
    actual = sha256_file(sealed_path)
    if actual != recorded.get("sha256"):
        raise mf.ManifestError(f"{sealed_path}: sha256 {actual}, the manifest says"
                               f" {recorded.get('sha256')}; the file is damaged or was altered."
                               " Nothing was restored")
    plain = crypto.open_sealed(_read_bounded(sealed_path, MAX_SEALED_BYTES, str(sealed_path)),
                               passphrase, str(sealed_path))
    files = archive.unpack(plain, str(sealed_path))
    inner_raw = files.pop(archive.INNER_MANIFEST, None)
    if inner_raw is None:
        raise mf.ManifestError(f"{sealed_path}: no {archive.INNER_MANIFEST} inside; refusing it")
    inner = mf.parse(inner_raw, f"{sealed_path}:{archive.INNER_MANIFEST}")
    if {k: v for k, v in outer.items() if k != "archive"} != inner:
        raise mf.ManifestError(f"{src}/{MANIFEST} differs from the sealed copy inside"
                               f" {ARCHIVE}: it was altered; refusing the backup")
    archive.check_members(files, inner["members"], str(sealed_path))
    return Verified(src, inner, files)


def read_manifest_only(src: Path) -> dict[str, Any]:
    """The plaintext manifest (what is in a backup, without the passphrase): not verified."""
    return mf.parse(_read_bounded(src / MANIFEST, mf.MAX_MANIFEST_BYTES, f"{src}/{MANIFEST}"),
                    f"{src}/{MANIFEST}")

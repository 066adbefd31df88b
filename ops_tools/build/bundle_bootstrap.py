"""``__main__`` of the development-node bundle (`ops-tools node devnode-bundle`): standard library
only, it runs with a host's own python3. Compiled extensions cannot be imported from inside a
zip, so the bundled site-packages are unpacked first: into a cache named by their content hash
when the user has a writable cache directory (a second run starts at once), else into a private
temporary directory removed at exit (a service user without a home of its own, under systemd
with ProtectHome and PrivateTmp)."""

from __future__ import annotations

import atexit
import importlib
import json
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

PREFIX = "site-packages/"


def _cache_root() -> Path | None:
    explicit = os.environ.get("NET_DEVNODE_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        home = os.path.expanduser("~")
        if home.startswith("~"):  # no home at all (a DynamicUser service)
            return None
        base = os.path.join(home, ".cache")
    return Path(base) / "net-devnode"


def _unpack(archive: zipfile.ZipFile, into: Path) -> None:
    for info in archive.infolist():
        if info.filename.startswith(PREFIX) and not info.is_dir():
            archive.extract(info, into)


def _site_packages(archive_path: str) -> Path:
    with zipfile.ZipFile(archive_path) as archive:
        content = json.loads(archive.read("bundle.json"))["content_sha256"]
        root = _cache_root()
        if root is not None:
            final = root / content
            if (final / ".complete").exists():
                return final / PREFIX
            try:
                root.mkdir(mode=0o700, parents=True, exist_ok=True)
                staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=root))
            except OSError:
                pass
            else:
                _unpack(archive, staging)
                (staging / ".complete").touch()
                try:
                    staging.rename(final)
                except OSError:  # another run got there first
                    shutil.rmtree(staging, ignore_errors=True)
                return final / PREFIX
        private = Path(tempfile.mkdtemp(prefix="net-devnode-"))
        atexit.register(shutil.rmtree, private, True)
        _unpack(archive, private)
        return private / PREFIX


def main() -> None:
    archive = os.path.abspath(sys.argv[0])
    sys.path.insert(0, str(_site_packages(archive)))
    with zipfile.ZipFile(archive) as zf:
        module, _, function = json.loads(zf.read("bundle.json"))["entry"].partition(":")
    getattr(importlib.import_module(module), function)()


if __name__ == "__main__":
    main()

"""The sha256 of a file, read in blocks (node binaries and bundles are tens of MB): one function
for every subpackage, the Ansible plugins and the tests."""

from __future__ import annotations

import hashlib
from pathlib import Path


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()

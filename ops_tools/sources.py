"""Digests of the suite's own source files, read by path: a subpackage that must identify another
one's code (a render cache keyed on the development node's source) does so without importing
it, so the dependency rules of docs/development.md hold."""

from __future__ import annotations

import hashlib
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def devnode_source_digest() -> str:
    """A digest of the development node's source (its runtime and genesis builder): the devnode
    console script is a launcher, and its --version names a release, not the code it runs."""
    package = PACKAGE_DIR / "devnode"
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
    return f"devnode source {digest.hexdigest()[:16]}"

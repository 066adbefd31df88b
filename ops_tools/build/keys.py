"""Cache keys: what makes two builds the same build (pure)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from ops_tools.errors import InputError

# Cargo feature names, optionally qualified by a package (``pkg/feature``).
_FEATURE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_+.-]*(?:/[A-Za-z0-9_][A-Za-z0-9_+.-]*)?$")
_PACKAGE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")


def normalize_features(features: Iterable[str]) -> tuple[str, ...]:
    """Split on commas and spaces as cargo does, drop duplicates, sort: order must not matter."""
    out: set[str] = set()
    for item in features:
        for name in re.split(r"[,\s]+", item.strip()):
            if not name:
                continue
            if not _FEATURE.match(name):
                raise InputError(
                    f"--features: {name!r} is not a cargo feature name"
                    " (letters, digits, '_', '-', '+', '.', optionally 'package/feature')"
                )
            out.add(name)
    return tuple(sorted(out))


def validate_package(package: str | None) -> str | None:
    if package is not None and not _PACKAGE.match(package):
        raise InputError(f"--package {package!r} is not a cargo package name")
    return package


def toolchain_id(rustc_vv: str) -> str:
    """The toolchain part of a key: a hash of ``rustc -vV`` (version, commit, host, LLVM)."""
    return hashlib.sha256(rustc_vv.strip().encode()).hexdigest()[:12]


def variant(features: tuple[str, ...], package: str | None) -> str:
    """Readable features (+ package) part of a key, safe as a file name."""
    feats = "+".join(f.replace("/", ".") for f in features) or "no-features"
    if len(feats) > 60:
        feats = "f" + hashlib.sha256(",".join(features).encode()).hexdigest()[:16]
    return f"{feats}@{package}" if package else feats


def artifact_key(revision: str, features: tuple[str, ...], toolchain: str,
                 package: str | None = None) -> str:
    """``<revision>-<features[@package]>-<toolchain>``: one artifact per distinct build."""
    return f"{revision}-{variant(features, package)}-{toolchain}"

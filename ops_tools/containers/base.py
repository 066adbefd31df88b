"""The llamacpp variant's base image: Debian bookworm (minbase) from ``debootstrap`` and
``docker import``, since no registry can be pulled. The root file system is cached as a tarball
named by the digest of its recipe: a changed recipe builds a new one, an unchanged one is reused
(a fresh CI machine builds it once)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ops_tools.errors import OpsError

CACHE_ROOT = Path(os.environ.get("NET_CONTAINERS_CACHE", "/var/cache/net-containers"))
MIRROR = os.environ.get("NET_CONTAINERS_MIRROR", "http://deb.debian.org/debian")
REPOSITORY = "net-base"

# Run chrooted in the fresh tree: what an image needs no more of (apt's lists, caches, docs).
_TRIM = """
set -eu
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc/* /usr/share/man/* \
       /usr/share/locale/*
"""


@dataclass(frozen=True)
class Recipe:
    suite: str = "bookworm"
    variant: str = "minbase"
    # python3-venv: the worker's virtualenv (its ensurepip installs the wheels offline);
    # libgomp1: llama.cpp's OpenMP threads.
    packages: tuple[str, ...] = ("python3", "python3-venv", "libgomp1")
    trim: str = _TRIM
    # The suite's python3 (bookworm: 3.11.2): the image's wheels are chosen for it, not for the
    # build host's Python (some dependencies' newest releases want a later 3.11).
    python_version: str = "3.11.2"

    def key(self) -> str:
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def tag(self) -> str:
        return f"{REPOSITORY}:{self.suite}-{self.key()}"


RECIPE = Recipe()


def tarball_path(recipe: Recipe = RECIPE, cache: Path | None = None) -> Path:
    return (cache or CACHE_ROOT) / f"base-{recipe.key()}.tar"


def _run(argv: list[str], out: Any) -> None:
    try:
        subprocess.run(argv, check=True, stdout=out, stderr=out,
                       env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"})
    except (OSError, subprocess.CalledProcessError) as exc:
        raise OpsError(f"building the container base image: {argv[0]} failed ({exc}); see"
                       " its log") from None


def ensure_tarball(recipe: Recipe = RECIPE, cache: Path | None = None,
                   log: Path | None = None) -> Path:
    """The cached root file system tarball of ``recipe``, built first when missing (one builder
    at a time; the tarball appears under its name only when complete)."""
    cache = cache or CACHE_ROOT
    final = tarball_path(recipe, cache)
    if final.is_file():
        return final
    if shutil.which("debootstrap") is None:
        raise OpsError("debootstrap is not installed; apt-get install debootstrap"
                       " (scripts/bootstrap --test installs it)")
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if final.is_file():
            return final
        staging = cache / f".staging-{recipe.key()}"
        shutil.rmtree(staging, ignore_errors=True)
        out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115
        try:
            _run(["debootstrap", f"--variant={recipe.variant}",
                  f"--include={','.join(recipe.packages)}", recipe.suite, str(staging), MIRROR],
                 out)
            _run(["chroot", str(staging), "/bin/sh", "-c", recipe.trim], out)
            partial = final.with_suffix(".tar.tmp")
            with tarfile.open(partial, "w") as tar:
                for child in sorted(staging.iterdir()):
                    tar.add(child, arcname=child.name)
            partial.rename(final)
        finally:
            if log:
                out.close()  # type: ignore[union-attr]
            shutil.rmtree(staging, ignore_errors=True)
        for old in cache.glob("base-*.tar"):
            if old != final:
                old.unlink(missing_ok=True)
    return final


def ensure_image(client: Any, recipe: Recipe = RECIPE, cache: Path | None = None,
                 log: Path | None = None) -> str:
    """The base image's tag in ``client``'s daemon (a docker SDK client), imported from the
    cached tarball when the daemon lacks it."""
    import docker.errors

    tag = recipe.tag()
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    tarball = ensure_tarball(recipe, cache, log)
    repository, _, version = tag.partition(":")
    client.api.import_image_from_file(str(tarball), repository=repository, tag=version)
    client.images.get(tag)
    return tag

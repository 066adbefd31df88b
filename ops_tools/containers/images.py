"""Building the worker's images (containers/worker/Dockerfile) with the docker SDK.

The build context is assembled in a directory of its own: the Dockerfile, its install script and
``wheels/``, collected on this machine with ``pip wheel`` (for the llamacpp variant every wheel
the worker and llama-cpp-python's server need, the compiled llama-cpp-python from pip's cache;
for the GPU variants the worker's own wheel only, their engines' Python installs its
dependencies). Nothing is compiled inside the image and no registry is pulled for llamacpp."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ops_tools.containers import base
from ops_tools.errors import InputError, OpsError

REPO_ROOT = Path(__file__).resolve().parents[2]
# How llama-cpp-python compiles should pip's cache lack its wheel: as scripts/bootstrap builds it.
LLAMACPP_CMAKE_ARGS = f"-DCMAKE_PROJECT_INCLUDE={REPO_ROOT / 'scripts' / 'llama-cpp-python.cmake'}"
DOCKERFILE_DIR = REPO_ROOT / "containers" / "worker"
REPOSITORY = "net-worker"
VARIANTS = ("llamacpp", "vllm", "sglang", "trtllm")
# Built and tested here; the others are FROM GPU engines' images that need a registry.
LOCAL_VARIANTS = ("llamacpp",)
# The image's user (install.sh): mounted configuration and secrets are made readable to it.
CONTAINER_UID = 10001
BUILD_TIMEOUT_S = 1800


@dataclass(frozen=True)
class Built:
    tag: str
    image_id: str
    base: str


def llamacpp_requirement(pyproject: Path = REPO_ROOT / "pyproject.toml") -> str:
    """llama-cpp-python as the project's ``llamacpp`` extra pins it."""
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    for requirement in extras["llamacpp"]:
        if re.match(r"llama-cpp-python\b", requirement):
            return str(requirement)
    raise OpsError(f"{pyproject}: the llamacpp extra pins no llama-cpp-python")


def check_variant(variant: str) -> str:
    if variant not in VARIANTS:
        raise InputError(f"variant: {variant!r}: use one of {', '.join(VARIANTS)}")
    return variant


def _pip(command: str, args: list[str], log: Path) -> None:
    argv = [sys.executable, "-m", "pip", command, "--disable-pip-version-check", *args]
    env = {**os.environ, "CMAKE_ARGS": LLAMACPP_CMAKE_ARGS}
    with open(log, "ab") as out:
        try:
            subprocess.run(argv, check=True, stdout=out, stderr=out, timeout=BUILD_TIMEOUT_S,
                           env=env)
        except (OSError, subprocess.SubprocessError) as exc:
            raise OpsError(f"collecting the image's wheels: pip {command} failed ({exc}); see"
                           f" {log}") from None


def build_context(variant: str, context: Path, log: Path) -> Path:
    """``context`` filled (emptied first) for ``variant``."""
    shutil.rmtree(context, ignore_errors=True)
    (context / "wheels").mkdir(parents=True)
    for name in ("Dockerfile", "install.sh"):
        shutil.copy2(DOCKERFILE_DIR / name, context / name)
    wheels = context / "wheels"
    if variant != "llamacpp":
        _pip("wheel", ["--wheel-dir", str(wheels), "--no-deps", str(REPO_ROOT)], log)
        return context
    # The worker's own wheel and llama-cpp-python's (from pip's wheel cache: it compiles once per
    # machine), then every dependency as a published wheel for the image's Python.
    _pip("wheel", ["--wheel-dir", str(wheels), "--no-deps", str(REPO_ROOT),
                   llamacpp_requirement()], log)
    _pip("download", ["--dest", str(wheels), "--only-binary=:all:", "--python-version",
                      base.RECIPE.python_version, "--find-links", str(wheels),
                      "net-ops-tools", f"{llamacpp_requirement()}"], log)
    return context


def build(client: Any, variant: str, workdir: Path, *, cache: Path | None = None,
          tag: str | None = None) -> Built:
    """Build ``net-worker:<variant>`` (or ``tag``) in ``client``'s daemon; the context and the
    build's log go to ``workdir``."""
    import docker.errors

    check_variant(variant)
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "build.log"
    base_tag = base.ensure_image(client, cache=cache, log=log) if variant == "llamacpp" else ""
    context = build_context(variant, workdir / f"context-{variant}", log)
    tag = tag or f"{REPOSITORY}:{variant}"
    buildargs = {"LLAMACPP_BASE": base_tag} if base_tag else {}
    try:
        image, lines = client.images.build(path=str(context), target=variant, tag=tag,
                                           buildargs=buildargs, rm=True, forcerm=True,
                                           pull=False, timeout=BUILD_TIMEOUT_S)
    except docker.errors.BuildError as exc:
        with open(log, "a") as out:
            for line in exc.build_log:
                out.write(str(line.get("stream") or line.get("error") or ""))
        raise OpsError(f"docker build of {tag} failed ({exc.msg}); see {log}") from None
    with open(log, "a") as out:
        for line in lines:
            out.write(str(line.get("stream") or ""))
    return Built(tag=tag, image_id=str(image.id), base=base_tag)

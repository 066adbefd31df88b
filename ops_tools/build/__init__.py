"""Pallet-suite revision -> node artifact: git cache, reproducible cargo build, artifact cache.

Pure logic (ref and repository classification, cache keys, the build environment, the manifest
model) lives in ``refs``, ``keys``, ``env`` and ``manifest``; git, cargo, docker and the file
system are at the edges (``gitcache``, ``cargo``, ``docker_builder``, ``artifact``, ``lock``,
``smoke``), and ``builder`` ties them together. Other concerns load a finished artifact with
``ops_tools.build.artifact.load_artifact``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Artifact", "load_artifact"]


def __getattr__(name: str) -> Any:
    # Loaded on first use: ``artifact`` pulls in the chain spec package (numpy and all), which
    # the light modules here (``devnode_probe``, ``refs``, ``keys``) do not need.
    if name in __all__:
        from ops_tools.build import artifact

        return getattr(artifact, name)
    raise AttributeError(name)

"""Pallet-suite revision -> node artifact: git cache, reproducible cargo build, artifact cache.

Pure logic (ref and repository classification, cache keys, the build environment, the manifest
model) lives in ``refs``, ``keys``, ``env`` and ``manifest``; git, cargo, docker and the file
system are at the edges (``gitcache``, ``cargo``, ``docker_builder``, ``artifact``, ``lock``,
``smoke``), and ``builder`` ties them together. Other concerns load a finished artifact with
``ops_tools.build.artifact.load_artifact``.
"""

from ops_tools.build.artifact import Artifact, load_artifact

__all__ = ["Artifact", "load_artifact"]

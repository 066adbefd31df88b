"""``net-worker`` configuration: a YAML file, with command-line flags over it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ops_tools.errors import InputError
from ops_tools.worker import listen

TEST_ENGINE = "test"
# The engine dialects (ops_tools/worker/engines/): "openai" is any OpenAI-compatible server.
ENGINE_KINDS = ("vllm", "sglang", "trtllm", "llamacpp", "openai", "test")


def _check_kind(kind: str | None, url: str) -> str:
    """The engine kind, checked against the URL: ``test`` and only it has the URL ``test``."""
    kind = kind or (TEST_ENGINE if url == TEST_ENGINE else "openai")
    if kind not in ENGINE_KINDS:
        raise ValueError(f"engine_kind {kind!r} is not one of {', '.join(ENGINE_KINDS)}")
    if (kind == TEST_ENGINE) != (url == TEST_ENGINE):
        raise ValueError(f"engine_kind {kind!r} with engine_url {url!r}: the test engine has the"
                         " URL 'test', every other kind the engine's http(s) base URL")
    return kind


def gguf_problem(path: Path) -> str | None:
    """Why ``path`` is not a readable GGUF model file, or None."""
    try:
        with path.open("rb") as handle:
            magic = handle.read(4)
    except FileNotFoundError:
        return "no such file; give the path of a GGUF model file on this host"
    except IsADirectoryError:
        return "a directory; give the GGUF model file in it"
    except OSError as exc:
        return f"cannot be read ({exc.strerror}); make it readable by this user"
    if magic != b"GGUF":
        return "not a GGUF file (it does not start with GGUF); llama.cpp serves GGUF models"
    return None


def gguf_file(value: Path | None) -> Path | None:
    """A settings validator: ``value`` unchanged when it is None or a GGUF model file."""
    problem = None if value is None else gguf_problem(value)
    if problem:
        raise ValueError(problem)
    return value


class ExtraEngine(BaseModel):
    """A further engine behind the worker, serving its own models (an embeddings server beside
    a text model, say)."""

    model_config = ConfigDict(extra="forbid")

    kind: str = "openai"
    url: str
    # The names its models are announced under; empty: those it lists at /v1/models.
    models: list[str] = Field(default_factory=list, max_length=64)

    @model_validator(mode="after")
    def _valid(self) -> ExtraEngine:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url {self.url!r} is not an http(s) URL")
        self.kind = _check_kind(self.kind, self.url)
        self.url = self.url.rstrip("/")
        return self


class WorkerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    listen_host: str = listen.DEFAULT_HOST
    listen_port: int = Field(listen.DEFAULT_PORT, ge=1, le=65535)
    # The URL the gateway calls this worker at (default: http://listen_host:listen_port).
    public_url: str | None = None
    gateway_url: str = "http://127.0.0.1:8005"
    # "test" runs the built-in TEST ENGINE; otherwise the base URL of an OpenAI-compatible engine
    # (vLLM, SGLang, TensorRT-LLM, llama.cpp server), e.g. http://127.0.0.1:8000
    engine_url: str = TEST_ENGINE
    # The engine's dialect (readiness, load, errors); None: test for "test", else openai.
    engine_kind: str | None = None
    # llamacpp: the engine's model file (GGUF). The worker then counts a stream's usage with
    # that model's tokenizer itself instead of asking the engine, whose tokenizer waits for the
    # engine's one lock (engines/llamacpp.py). None: ask the engine.
    engine_model_path: Path | None = None
    extra_engines: list[ExtraEngine] = Field(default_factory=list, max_length=8)
    # How long an idle connection to the engine(s) stays in the worker's pool. Keep it shorter
    # than the engine keeps one open (uvicorn-based engines and llama.cpp's server: 5 s), so the
    # worker closes first and never sends a request on a connection the engine is closing.
    engine_keepalive_s: float = Field(4.0, gt=0, le=3600)
    # Models announced; empty: those the engine lists at /v1/models.
    models: list[str] = Field(default_factory=list)
    capacity: int = Field(16, ge=1, le=100_000)
    rpc_url: str = "ws://127.0.0.1:9944"
    keystore_dir: Path | None = None  # default: wallet-cli's
    account: str = "operator"
    passphrase_file: Path | None = None
    # Development accounts only (inventories/local): a file holding a secret URI such as
    # //Operator1, instead of a keystore account.
    dev_suri_file: Path | None = None
    # When set and the operator is not registered: OperatorStake::register with this stake.
    register_stake: int | None = Field(None, ge=1)
    tick_s: float = Field(2.0, gt=0)
    announce_interval_s: float = Field(15.0, gt=0)
    # Test engine only: delay between streamed tokens (tests kill a worker mid-stream).
    test_engine_token_delay_ms: int = Field(0, ge=0)
    # Keys the platform's service role writes for every service (docs/services.md): the genesis
    # the worker serves (None: the chain's; another one makes it unready), its directory, ...
    genesis_hash: str | None = None
    state_dir: Path | None = None
    shutdown_timeout_s: float = Field(10.0, gt=0)
    # On SIGTERM: how long the requests in flight may still take (a long stream on a slow
    # engine); the container's stop timeout and systemd's TimeoutStopSec must be longer.
    drain_timeout_s: float = Field(60.0, gt=0, le=3600)
    log_level: str = "info"

    @field_validator("engine_url", "gateway_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if value != TEST_ENGINE and not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value.rstrip("/")

    _model_file = field_validator("engine_model_path")(staticmethod(gguf_file))

    @model_validator(mode="after")
    def _key_source(self) -> WorkerSettings:
        self.engine_kind = _check_kind(self.engine_kind, self.engine_url)
        if self.engine_model_path is not None and self.engine_kind != "llamacpp":
            raise ValueError(f"engine_model_path with engine_kind {self.engine_kind!r}: only"
                             " the llamacpp dialect reads the model file")
        if (self.passphrase_file is None) == (self.dev_suri_file is None):
            raise ValueError(
                "give passphrase_file (with account, a wallet-cli keystore account) or"
                " dev_suri_file (development accounts), exactly one of them"
            )
        return self

    def endpoint(self) -> str:
        return (self.public_url or f"http://{self.listen_host}:{self.listen_port}").rstrip("/")


def load(path: Path | None, overrides: dict[str, Any]) -> WorkerSettings:
    data: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise InputError(f"--config: cannot read {path} ({exc}); pass a YAML file") from exc
        if not isinstance(loaded, dict):
            raise InputError(f"--config: {path} is not a YAML mapping of settings")
        data.update(loaded)
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return WorkerSettings(**data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        value = first.get("input")
        shown = "<missing>" if first["type"] == "missing" else repr(value)
        raise InputError(f"{field}: {shown}: {first['msg']}") from None

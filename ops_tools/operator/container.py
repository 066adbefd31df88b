"""The worker as a Docker container (``onboard --container``, docs/containers.md): the files the
container mounts and the container itself, through ``ops_tools.containers``. The files live in
``<state>/container/``:

    config/worker.yml         the worker's settings, with the paths it sees inside
    config/engine.yml         the engine the container starts beside it (with --model-path)
    config/keystore/          the operator's account (its two encrypted keystore files)
    secrets/passphrase        the keystore's passphrase, mounted at /run/secrets/passphrase

each 0600 (directories 0700) and owned by the container's user."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from ops_tools.containers import run as containers
from ops_tools.errors import InputError
from ops_tools.operator.context import Options
from ops_tools.wallet.keystore import ETH_SUFFIX, SR25519_SUFFIX

PASSPHRASE = "passphrase"  # noqa: S105 (the secret's file name)


def model_in_container(opts: Options) -> str:
    """Where --model-path's file is inside the container: the file alone is mounted."""
    assert opts.model_path is not None
    return f"{containers.MODEL_DIR}/{opts.model_path.name}"


def engine_port(opts: Options) -> int:
    parts = urlsplit(opts.engine_url)
    if parts.hostname not in ("127.0.0.1", "localhost") or parts.port is None:
        raise InputError(f"--engine-url: {opts.engine_url!r}: with --model-path the container"
                         " starts its own engine on loopback; give http://127.0.0.1:<port>")
    return parts.port


def worker_config(opts: Options, genesis_hash: str) -> str:
    config: dict[str, Any] = {
        "listen_host": opts.worker_host,
        "listen_port": opts.worker_port,
        "public_url": opts.worker_url(),
        "gateway_url": opts.gateway_url.rstrip("/"),
        "engine_url": opts.engine_url,
        "models": list(opts.models),
        "rpc_url": opts.rpc_url,
        "keystore_dir": containers.KEYSTORE_DIR,
        "account": opts.name,
        "passphrase_file": f"{containers.SECRETS_DIR}/{PASSPHRASE}",
        "genesis_hash": genesis_hash,
        # As on the host; the container's stop timeout is derived from it
        # (containers.default_stop_timeout), so docker never kills a draining worker.
        "drain_timeout_s": opts.drain_timeout_s,
        "log_level": "info",
    }
    if opts.engine_kind is not None:
        config["engine_kind"] = opts.engine_kind
    if opts.model_path is not None:  # the worker counts streamed usage with its tokenizer
        config["engine_model_path"] = model_in_container(opts)
    return "# Written by ops-tools operator onboard --container (docs/containers.md).\n" + \
        yaml.safe_dump(config, sort_keys=True)


def engine_config(opts: Options) -> str | None:
    if opts.model_path is None:
        return None
    config: dict[str, Any] = {"kind": "llamacpp", "listen_host": "127.0.0.1",
                              "listen_port": engine_port(opts),
                              "model_path": model_in_container(opts)}
    if opts.models:  # served under the first --model, as on the host (units.engine_config)
        config["model_alias"] = opts.models[0]
    return "# Written by ops-tools operator onboard --container (docs/containers.md).\n" + \
        yaml.safe_dump(config, sort_keys=True)


# The keystore opens an account only when both its files are there (wallet/keystore.py).
KEYSTORE_SUFFIXES = (SR25519_SUFFIX, ETH_SUFFIX)


def files(opts: Options, genesis_hash: str, passphrase: str,
          keystore: dict[str, bytes]) -> dict[Path, bytes]:
    """What the container mounts, by host path; ``keystore``: the account's files by name."""
    config = opts.container_dir / "config"
    out = {config / "worker.yml": worker_config(opts, genesis_hash).encode(),
           **{config / "keystore" / name: content for name, content in keystore.items()},
           opts.container_dir / "secrets" / PASSPHRASE: passphrase.encode()}
    engine = engine_config(opts)
    if engine is not None:
        out[config / "engine.yml"] = engine.encode()
    return out


def spec(opts: Options) -> containers.WorkerContainer:
    uid, gid = containers.container_user()
    return containers.WorkerContainer(
        name=opts.program, image=opts.container_image,
        config_dir=opts.container_dir / "config",
        secrets={PASSPHRASE: opts.container_dir / "secrets" / PASSPHRASE},
        model_file=opts.model_path, drain_timeout_s=opts.drain_timeout_s, user=f"{uid}:{gid}")


def deploy(opts: Options) -> bool:
    uid, gid = containers.container_user()
    containers.hand_over([opts.container_dir], uid, gid)
    return containers.deploy(containers.client(opts.docker_host), spec(opts))


def running(opts: Options) -> bool:
    return containers.running(containers.client(opts.docker_host), opts.program)

"""Running the worker's image as a container (docker SDK): what the operator's onboarding and
roles/worker's container mode deploy.

The container gets its configuration and secrets as read-only bind mounts of files on the host,
never as environment variables or arguments (``docker inspect`` and ``ps`` show those):

    <config_dir>/worker.yml, engine.yml, keystore/  ->  /etc/net-worker/     (read-only)
    <secret files>                                  ->  /run/secrets/<name> (read-only, 0600)
    <model_dir>                                     ->  /models             (read-only)
    <model_file>                                    ->  /models/<its name>  (read-only)

It runs on the host's network (the engine and the worker listen on loopback as they do outside
a container), as the image's unprivileged user, with a read-only root file system (a tmpfs at
/tmp), every capability dropped and no new privileges."""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ops_tools.containers.images import CONTAINER_UID
from ops_tools.errors import InputError, OpsError

CONFIG_DIR = "/etc/net-worker"
KEYSTORE_DIR = "/etc/net-worker/keystore"
SECRETS_DIR = "/run/secrets"
MODEL_DIR = "/models"
LABEL = "net.ops.worker"
# What the running container was made from: the spec, the image and every mounted file's content
# (the worker reads them only when it starts, so a changed file means a new container).
SPEC_LABEL = "net.ops.worker.spec"
# The chain of stop bounds (docs/containers.md, "Stopping: the drain"), each longer than the one
# before: the worker's drain (drain_timeout_s) < the container's stop timeout (docker stop's
# grace before SIGKILL) < what waits for docker stop (this module's HTTP call, Ansible's task
# timeout, docker.service's TimeoutStopSec). After the drain the worker still has uvicorn's
# graceful shutdown (10 s, worker/cli.py) and the entry point then stops the engine (up to 30 s,
# worker/container.py ENGINE_STOP_S): the stop timeout must cover all three.
AFTER_DRAIN_S = 10 + 30
# The default stop timeout's slack on top of that (a loaded host's process exits are slow).
STOP_SLACK_S = 20
STOP_TIMEOUT_MAX_S = 7200


def default_stop_timeout(drain_timeout_s: float) -> int:
    return math.ceil(drain_timeout_s) + AFTER_DRAIN_S + STOP_SLACK_S


def stop_timeout_problem(stop_timeout_s: int, drain_timeout_s: float) -> str | None:
    """Why ``stop_timeout_s`` would cut the worker's drain short (or is out of bounds), or
    None."""
    least = math.ceil(drain_timeout_s) + AFTER_DRAIN_S
    if stop_timeout_s > STOP_TIMEOUT_MAX_S:
        return f"at most {STOP_TIMEOUT_MAX_S} s"
    if stop_timeout_s < least:
        return (f"shorter than the drain it must wait for: at least the drain timeout"
                f" ({drain_timeout_s:g} s) + {AFTER_DRAIN_S} s (the worker's shutdown and the"
                f" engine's stop after the drain) = {least} s; give a longer stop timeout or a"
                f" shorter drain timeout")
    return None


@dataclass(frozen=True)
class WorkerContainer:
    name: str
    image: str
    config_dir: Path
    secrets: dict[str, Path] = field(default_factory=dict)
    model_dir: Path | None = None
    # A single model file, mounted at /models/<its name> (nothing else of its directory).
    model_file: Path | None = None
    drain_timeout_s: float = 60.0
    # docker stop's grace before SIGKILL; None: default_stop_timeout(drain_timeout_s).
    stop_timeout_s: int | None = None
    user: str = f"{CONTAINER_UID}:{CONTAINER_UID}"
    tmpfs_size: str = "64m"
    restart: str = "unless-stopped"

    def __post_init__(self) -> None:
        if self.model_dir is not None and self.model_file is not None:
            raise InputError("a model directory or a model file: mount one of them at /models")
        problem = stop_timeout_problem(self.stop_timeout(), self.drain_timeout_s)
        if problem:
            raise InputError(f"stop timeout {self.stop_timeout()} s: {problem}")

    def stop_timeout(self) -> int:
        if self.stop_timeout_s is None:
            return default_stop_timeout(self.drain_timeout_s)
        return self.stop_timeout_s

    def model_in_container(self) -> str | None:
        """Where the model file is inside the container."""
        return None if self.model_file is None else f"{MODEL_DIR}/{self.model_file.name}"

    def mounts(self) -> dict[str, dict[str, str]]:
        """The docker SDK's ``binds``: every one read-only."""
        volumes = {str(self.config_dir): {"bind": CONFIG_DIR, "mode": "ro"}}
        for name, path in sorted(self.secrets.items()):
            volumes[str(path)] = {"bind": f"{SECRETS_DIR}/{name}", "mode": "ro"}
        if self.model_dir is not None:
            volumes[str(self.model_dir)] = {"bind": MODEL_DIR, "mode": "ro"}
        if self.model_file is not None:
            volumes[str(self.model_file)] = {"bind": str(self.model_in_container()),
                                             "mode": "ro"}
        return volumes

    def host_config(self) -> dict[str, Any]:
        """The arguments of the SDK's ``create_host_config``."""
        return {
            "network_mode": "host",
            "read_only": True,
            "tmpfs": {"/tmp": f"rw,nosuid,nodev,noexec,size={self.tmpfs_size}"},  # noqa: S108
            "binds": self.mounts(),
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "restart_policy": {"Name": self.restart} if self.restart != "no" else None,
        }

    def create_kwargs(self) -> dict[str, Any]:
        """The arguments of the SDK's ``create_container`` (the low-level one: the high-level
        ``containers.run`` drops ``stop_timeout``), but ``host_config``: no ``environment``, no
        ``command``."""
        return {
            "image": self.image,
            "name": self.name,
            "user": self.user,
            "stop_signal": "SIGTERM",
            "stop_timeout": self.stop_timeout(),
            "labels": {LABEL: self.name},
        }


def spec_digest(spec: WorkerContainer, image_id: str) -> str:
    digest = hashlib.sha256()
    described = {"create": spec.create_kwargs(), "host": spec.host_config()}
    digest.update(json.dumps(described, sort_keys=True, default=str).encode())
    digest.update(image_id.encode())
    for source in sorted(spec.mounts()):
        path = Path(source)
        if path in (spec.model_dir, spec.model_file):
            continue  # the model: named by path (hashing gigabytes at every run is no use)
        for item in sorted([path, *path.rglob("*")] if path.is_dir() else [path]):
            if item.is_file():
                digest.update(str(item).encode() + b"\0" + item.read_bytes() + b"\0")
    return digest.hexdigest()[:32]


def container_user() -> tuple[int, int]:
    """The uid and gid the container runs as: the image's own user when the deployment runs as
    root (it hands the mounted files to that uid), else the deploying user's (who owns them and
    is not root either)."""
    if os.geteuid() == 0:
        return CONTAINER_UID, CONTAINER_UID
    return os.geteuid(), os.getegid()


def hand_over(paths: list[Path], uid: int, gid: int) -> None:
    """The mounted files to the container's user (their modes stay: 0600 secrets)."""
    if os.geteuid() != 0:
        return
    for path in paths:
        for item in [path, *(path.rglob("*") if path.is_dir() else [])]:
            os.chown(item, uid, gid)


def client(base_url: str | None = None, timeout: int = 120) -> Any:
    import docker
    import docker.errors

    try:
        if base_url:
            return docker.DockerClient(base_url=base_url, timeout=timeout)
        return docker.from_env(timeout=timeout)
    except docker.errors.DockerException as exc:
        raise OpsError(f"cannot reach the Docker daemon ({exc}); start it, or give its socket"
                       " (--docker-host unix:///run/docker.sock, or $DOCKER_HOST)") from None


def deploy(docker_client: Any, spec: WorkerContainer, *, check: bool = False) -> bool:
    """The container as ``spec`` says, running; True when it was (or, ``check``: would be)
    created anew. A container of that name made from another spec, image or mounted files is
    stopped (it drains) and replaced; one made from these and running is left alone."""
    import docker.errors

    try:
        image = docker_client.images.get(spec.image)
    except docker.errors.ImageNotFound:
        raise OpsError(f"image {spec.image} is not in the Docker daemon; build it (ops-tools"
                       " containers build llamacpp, docs/containers.md) or load it") from None
    wanted = spec_digest(spec, str(image.id))
    try:
        existing = docker_client.containers.get(spec.name)
    except docker.errors.NotFound:
        existing = None
    if existing is not None and existing.labels.get(SPEC_LABEL) == wanted and \
            existing.status == "running":
        return False
    if check:
        return True
    remove(docker_client, spec.name)
    api = docker_client.api
    kwargs = spec.create_kwargs()
    kwargs["labels"] = {**kwargs["labels"], SPEC_LABEL: wanted}
    created = api.create_container(**kwargs,
                                   host_config=api.create_host_config(**spec.host_config()))
    api.start(created["Id"])
    return True


def remove(docker_client: Any, name: str) -> None:
    import docker.errors

    try:
        existing = docker_client.containers.get(name)
    except docker.errors.NotFound:
        return
    # The container's own stop timeout, given explicitly: the SDK then waits that long on top of
    # its HTTP timeout (without it, the client's timeout alone bounds the call and could give up
    # on a stop that is still draining).
    stop = existing.attrs.get("Config", {}).get("StopTimeout")
    existing.stop(timeout=int(stop) if isinstance(stop, int) and stop >= 0 else 10)
    existing.remove(force=True)


def running(docker_client: Any, name: str) -> bool:
    import docker.errors

    try:
        return bool(docker_client.containers.get(name).status == "running")
    except docker.errors.NotFound:
        return False

"""``ops-tools containers build|deploy``: the worker's images and the container that runs one
(docs/containers.md), through the docker SDK."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from ops_tools.cli.output import err_console, print_json
from ops_tools.errors import InputError

app = typer.Typer(help="The worker's container images and containers.", no_args_is_help=True)
DockerHostOpt = typer.Option(None, "--docker-host", help="The Docker daemon (default"
                             " $DOCKER_HOST, else the system's).")
JsonOpt = typer.Option(False, "--json", help="Machine output.")


@app.command("build")
def build(
    variant: str = typer.Argument(..., help="llamacpp (built here), vllm, sglang or trtllm"
                                  " (FROM their engines' images: a registry and a GPU host)."),
    workdir: Path = typer.Option(Path("build/containers"), "--workdir", help="Where the build"
                                 " context and build.log go."),
    tag: str | None = typer.Option(None, "--tag", help="Default net-worker:<variant>."),
    docker_host: str | None = DockerHostOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Build net-worker:<variant> (containers/worker/Dockerfile)."""
    from ops_tools.containers import images
    from ops_tools.containers import run as containers

    images.check_variant(variant)
    started = time.monotonic()
    built = images.build(containers.client(docker_host), variant, workdir.resolve(), tag=tag)
    out = {"tag": built.tag, "image_id": built.image_id, "base": built.base,
           "seconds": round(time.monotonic() - started, 1)}
    if json_out:
        print_json(out)
        return
    err_console.print(f"built {built.tag} ({built.image_id[:19]}) in {out['seconds']} s",
                      markup=False, highlight=False)


def _secrets(values: list[str]) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name.replace("_", "").isalnum() or not path:
            raise InputError(f"--secret: {value!r}: give NAME=PATH (NAME letters, digits, _)")
        out[name] = Path(path).resolve()
    return out


def _model_file(path: Path) -> Path:
    from ops_tools.worker.config import gguf_problem

    problem = gguf_problem(path)
    if problem:
        raise InputError(f"--model-file: {str(path)!r}: {problem}")
    return path.resolve()


@app.command("deploy")
def deploy(
    name: str = typer.Option(..., "--name", help="The container's name."),
    image: str = typer.Option("net-worker:llamacpp", "--image"),
    config_dir: Path = typer.Option(..., "--config-dir", help="Mounted at /etc/net-worker"
                                    " (worker.yml, engine.yml, keystore/), read-only."),
    secret: list[str] = typer.Option([], "--secret", help="NAME=PATH: a file mounted at"
                                     " /run/secrets/NAME, read-only."),
    model_dir: Path | None = typer.Option(None, "--model-dir", help="Mounted at /models,"
                                          " read-only."),
    model_file: Path | None = typer.Option(None, "--model-file", help="A GGUF model file on"
                                           " this host, mounted read-only at /models/<its"
                                           " name> (instead of --model-dir)."),
    user: str | None = typer.Option(None, "--user", help="uid:gid (default the image's"
                                    " 10001:10001 when run as root, else the caller's)."),
    drain_timeout: float = typer.Option(60.0, "--drain-timeout", help="The worker's"
                                        " drain_timeout_s: docker stop waits longer."),
    stop_timeout: int | None = typer.Option(None, "--stop-timeout", help="docker stop's grace"
                                            " before SIGKILL, seconds: at least the drain"
                                            " timeout + 40 (default drain + 60)."),
    check: bool = typer.Option(False, "--check", help="Only say whether it would change."),
    docker_host: str | None = DockerHostOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Run the worker's container (replacing one made from other files or another image)."""
    from ops_tools.containers import run as containers

    if not 0 < drain_timeout <= 3600:
        raise InputError(f"--drain-timeout: {drain_timeout:g}: seconds, more than 0, at most"
                         " 3600 (the worker's drain_timeout_s)")
    if stop_timeout is not None:
        problem = containers.stop_timeout_problem(stop_timeout, drain_timeout)
        if problem:
            raise InputError(f"--stop-timeout: {stop_timeout}: {problem}")
    if model_file is not None:
        if model_dir is not None:
            raise InputError("--model-dir / --model-file: give one (both would be /models)")
        model_file = _model_file(model_file)
    if not (config_dir / "worker.yml").is_file():
        if check:  # a first run in check mode: the files are not written yet
            _report(name, changed=True, check=True, json_out=json_out)
            return
        raise InputError(f"--config-dir: {config_dir}: no worker.yml in it")
    if user is None:
        uid, gid = containers.container_user()
        user = f"{uid}:{gid}"
    spec = containers.WorkerContainer(
        name=name, image=image, config_dir=config_dir.resolve(), secrets=_secrets(secret),
        model_dir=model_dir.resolve() if model_dir else None, model_file=model_file,
        drain_timeout_s=drain_timeout, stop_timeout_s=stop_timeout, user=user)
    changed = containers.deploy(containers.client(docker_host), spec, check=check)
    _report(name, changed=changed, check=check, json_out=json_out)


def _report(name: str, *, changed: bool, check: bool, json_out: bool) -> None:
    if json_out:
        print_json({"name": name, "changed": changed, "check": check})
        return
    err_console.print(f"{name}: {'changed' if changed else 'unchanged'}", markup=False,
                      highlight=False)

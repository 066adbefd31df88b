"""Step 6: the worker under the service manager, live at the gateway and answering through it.

container (``--container``): a Docker container of the worker's image, driven by the docker SDK
(``operator/container.py``, docs/containers.md). systemd: a hardened ``Type=notify`` unit with
``WatchdogSec`` (the worker notifies the watchdog every liveness tick); supervisor: a program in the
supervisord's ``conf.d`` (the local network's, or a host's). The passphrase is copied into the state
directory's ``secrets/`` (0600): the worker unlocks the keystore with it at every start. No secret
of the gateway's is needed: the gateway answers the worker's admitted announcement with the worker's
own token.

Deployed by roles/worker (playbooks/operator_worker.yml, ``--worker-manifest``): the role's
converge owns the worker's files, program and restarts (and, with an operator's model file, the
engine's); this step writes and installs nothing. It acts on the program its deployed manifest
names (``ops_tools.programs``: started if it is down), then waits for it as above. The journal
keeps the manifest's path, so that a later run without the option checks that worker, not a
program of its own.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import httpx

from ops_tools import atomic
from ops_tools.errors import InputError, OpsError
from ops_tools.operator import container, gateway_client, service_user, units
from ops_tools.operator.context import TEST_ENGINE, Context, Options
from ops_tools.operator.steps import Outcome, gone, patiently
from ops_tools.programs import Program

NAME = "daemon"
TITLE = "Daemon"


def _run(argv: list[str], what: str) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    except OSError as exc:
        raise OpsError(f"daemon: {what}: cannot run {argv[0]} ({exc.strerror})") from None
    if done.returncode != 0:
        output = (done.stderr or done.stdout).strip().splitlines()
        raise OpsError(f"daemon: {what} failed (exit {done.returncode}):"
                       f" {output[-1] if output else 'no output'}")
    return done.stdout


def log_hint(opts: Options) -> str:
    if opts.container:
        return f"docker logs {opts.program}"
    if opts.service_manager == "systemd":
        return f"journalctl -u {opts.program}"
    return str(opts.state_dir / "worker.log")


def _supervisor_conf(opts: Options) -> Path:
    conf = opts.supervisor_conf
    if conf is None or not conf.is_file():
        raise InputError(f"--supervisor-conf: {conf}: no supervisord configuration there; give"
                         " the supervisord.conf whose conf.d/ takes the worker's program, or use"
                         " --service-manager systemd")
    return conf


def _program(opts: Options, engine: bool = False) -> Program:
    name = opts.engine_program if engine else opts.program
    if opts.service_manager == "systemd":
        return Program("systemd", name)
    return Program("supervisor", name, str(_supervisor_conf(opts)))


def _service_file(opts: Options, engine: bool = False) -> tuple[Path, str]:
    """The systemd unit or supervisor program (the worker's, or with ``engine`` the llama.cpp
    server's of --model-path), and its text."""
    if opts.service_manager == "systemd":
        if engine:
            return (opts.systemd_unit_dir / f"{opts.engine_program}.service",
                    units.engine_systemd_unit(opts))
        return opts.systemd_unit_dir / f"{opts.program}.service", units.systemd_unit(opts)
    conf_d = _supervisor_conf(opts).parent / "conf.d"
    if engine:
        return conf_d / f"{opts.engine_program}.conf", units.engine_supervisor_program(opts)
    return conf_d / f"{opts.program}.conf", units.supervisor_program(opts)


def _install_supervisor(opts: Options, engine: bool = False) -> None:
    program = _program(opts, engine)
    path, text = _service_file(opts, engine)
    atomic.write_text(path, text, mode=0o644)
    _run(program.argv("update", local=True), "supervisorctl update")
    # restart whether update started it or it ran already: a re-run must pick up new files.
    _run(program.argv("restart", local=True), "supervisorctl restart")


def _install_systemd(opts: Options, engine: bool = False) -> None:
    unit, text = _service_file(opts, engine)
    try:
        atomic.write_text(unit, text, mode=0o644)
    except PermissionError:
        raise OpsError(f"daemon: cannot write {unit} (permission denied); run onboard as root"
                       " (sudo) or use --service-manager supervisor") from None
    program = _program(opts, engine)
    _run(["systemctl", "daemon-reload"], "systemctl daemon-reload")
    _run(program.argv("enable"), "systemctl enable")
    # restart, not start: a re-run after a failed daemon step must pick up the new files.
    _run(program.argv("restart"), "systemctl restart")


def _wait(what: str, check, opts: Options) -> object:  # noqa: ANN001 - a small poll helper
    deadline = time.monotonic() + opts.timeout_s
    last: object = None
    while time.monotonic() < deadline:
        last = check()
        if last and not isinstance(last, str):
            return last
        time.sleep(1)
    raise OpsError(f"daemon: {what} within {opts.timeout_s:g} s ({last or 'no answer'});"
                   f" see the worker's log: {log_hint(opts)}")


def _ready(url: str) -> bool | str:
    """True once the worker says it is ready, else why not: its ``/ready`` answers 200 only
    after the gateway accepted its announcement (the token the gateway's requests carry) and
    its heartbeats went through. ``/health`` answers as soon as the process serves, while the
    gateway may still list the process before it as live: requests sent then are refused."""
    try:
        response = httpx.get(f"{url}/ready", timeout=5)
    except httpx.HTTPError as exc:
        return type(exc).__name__
    if response.status_code == 200:
        return True
    try:
        message = response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = response.text[:200]
    return f"{response.status_code}: {message}"


def _files(ctx: Context) -> dict[Path, bytes]:
    """What the worker reads at every start (each 0600): its configuration and secrets."""
    opts = ctx.options
    if opts.container:
        keystore: dict[str, bytes] = {}
        for suffix in container.KEYSTORE_SUFFIXES:
            path = opts.keystore_dir / f"{opts.name}{suffix}"
            try:
                keystore[path.name] = path.read_bytes()
            except OSError as exc:
                raise OpsError(f"daemon: cannot read the keystore file {path}"
                               f" ({exc.strerror})") from None
        return container.files(opts, str(ctx.journal.genesis_hash), ctx.passphrase(), keystore)
    passphrase_file = opts.secrets_dir / "passphrase"
    config = units.worker_config(opts, str(ctx.journal.genesis_hash), passphrase_file)
    files = {passphrase_file: ctx.passphrase().encode(),
             opts.state_dir / "worker.yml": config.encode()}
    if opts.model_path is not None:
        files[opts.state_dir / "engine.yml"] = units.engine_config(opts).encode()
    return files


def _models_answer(url: str) -> bool | str:
    try:
        return httpx.get(f"{url}/v1/models", timeout=5).status_code == 200
    except httpx.HTTPError as exc:
        return type(exc).__name__


def _start_engine(opts: Options, ctx: Context) -> None:
    """--model-path: llama.cpp's server for the file, started and answering before the worker."""
    if opts.service_manager == "systemd":
        _install_systemd(opts, engine=True)
    else:
        _install_supervisor(opts, engine=True)
    ctx.emit(f"{opts.engine_program} started for {opts.model_path}; waiting for"
             f" {opts.engine_url}/v1/models")
    hint = (f"journalctl -u {opts.engine_program}" if opts.service_manager == "systemd"
            else str(opts.state_dir / "engine.log"))
    deadline = time.monotonic() + opts.timeout_s
    last: bool | str = False
    while time.monotonic() < deadline:
        last = _models_answer(opts.engine_url)
        if last is True:
            return
        time.sleep(1)
    raise OpsError(f"daemon: llama.cpp's server for {opts.model_path} did not answer"
                   f" {opts.engine_url}/v1/models within {opts.timeout_s:g} s"
                   f" ({last if isinstance(last, str) else 'no answer'}); see its log: {hint}")


def _manifest_path(ctx: Context) -> Path | None:
    """The deployed manifest of a worker that roles/worker runs: the option's, else the one
    the journal recorded."""
    if ctx.options.worker_manifest is not None:
        return ctx.options.worker_manifest
    recorded = ctx.facts.get("worker_manifest")
    return Path(recorded) if isinstance(recorded, str) and recorded else None


def _deployed(path: Path) -> Program:
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise OpsError(f"daemon: {path}: no deployed manifest of the worker; converge it with"
                       " roles/worker first (playbooks/operator_worker.yml)") from None
    except (OSError, ValueError) as exc:
        raise OpsError(f"daemon: {path}: unreadable deployed manifest ({exc}); converge the"
                       " worker with roles/worker again") from None
    if not isinstance(manifest, dict):
        raise OpsError(f"daemon: {path}: the deployed manifest is not a mapping; converge the"
                       " worker with roles/worker again")
    return Program.from_manifest(manifest, str(path))


def _status(program: Program) -> bool:
    argv = program.status_argv(local=True)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except OSError as exc:
        raise OpsError(f"daemon: cannot run {argv[0]} ({exc.strerror}) to check the"
                       " worker") from None
    return program.running(done.stdout)


def run(ctx: Context) -> Outcome:
    opts = ctx.options
    manifest = _manifest_path(ctx)
    if manifest is not None:
        program = _deployed(manifest)
        if not _status(program):
            ctx.emit(f"{program.name} ({program.manager}) is down: starting it")
            try:
                _run(["sh", "-c", program.start()], f"start {program.name}")
            except OpsError as exc:
                # The role's files may be gone with the host's or network's service manager (a
                # re-created local network): only the role can write them again.
                raise OpsError(f"{exc}; roles/worker deployed it ({manifest}): converge the worker"
                               " again with playbooks/operator_worker.yml, which then resumes this"
                               " onboarding") from None
        return _live(ctx, program.name, program.manager, {"worker_manifest": str(manifest)})
    files = _files(ctx)
    prepared = False
    # --model-path on the host: llama.cpp's server as a program of its own, answering before the
    # worker starts (in a container the image runs it beside the worker).
    if opts.model_path is not None and not opts.container:
        if opts.service_manager == "systemd":
            service_user.prepare(opts, ctx.emit)
            prepared = True
        for path, content in files.items():
            atomic.write_bytes(path, content, mode=0o600)
        _start_engine(opts, ctx)
    if opts.engine_url != TEST_ENGINE and not (opts.container and opts.model_path is not None):
        try:
            httpx.get(f"{opts.engine_url}/v1/models", timeout=10).raise_for_status()
        except httpx.HTTPError as exc:
            raise OpsError(f"daemon: the engine at {opts.engine_url} does not answer /v1/models"
                           f" ({exc}); start it first, or fix --engine-url") from None
    if opts.service_manager == "systemd" and not opts.container and not prepared:
        service_user.prepare(opts, ctx.emit)
    for path, content in files.items():
        # Directories 0700: the container's user alone reads what is mounted.
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic.write_bytes(path, content, mode=0o600)
    if opts.container:
        container.deploy(opts)
    elif opts.service_manager == "systemd":
        _install_systemd(opts)
    else:
        _install_supervisor(opts)
    if opts.container:
        return _live(ctx, opts.program, "docker", {}, f"container {opts.container_image}")
    return _live(ctx, opts.program, opts.service_manager, {})


def _live(ctx: Context, program: str, manager: str, more: dict,
          shown: str | None = None) -> Outcome:
    """The worker answers, the gateway lists it as live, and (with a gateway key) a test
    request through the gateway is answered by it."""
    opts = ctx.options
    url, account = opts.worker_url(), ctx.facts["account"]
    ctx.emit(f"{program} runs ({shown or manager}); waiting for {url}/ready")
    _wait(f"the worker was not ready at {url}/ready", lambda: _ready(url), opts)
    ctx.emit("waiting until the gateway lists the worker as live")

    def live() -> dict | str | None:
        row = gateway_client.worker_view(opts.gateway_url, ctx.keypair(),
                                         str(ctx.journal.genesis_hash))
        if row is None:
            return "the gateway does not know the worker yet"
        return row if row.get("live") else str(row.get("reason"))

    row = _wait("the gateway did not list the worker as live", live, opts)
    assert isinstance(row, dict)
    facts = {"worker_url": url, "program": program, "service_manager": manager,
             "models": row.get("models", []), "gateway_view": row, **more}
    if opts.gateway_key_file is None:
        return Outcome(f"worker live at the gateway (models {', '.join(row['models'])}); no"
                       " --gateway-key-file, so no test request", facts)
    key = opts.gateway_key_file.read_text().strip()
    try:
        answer = gateway_client.request_served_by(opts.gateway_url, key, row["models"][0],
                                                  account, timeout_s=max(60.0, opts.timeout_s))
    except OpsError as exc:
        # What the gateway thinks of the worker now says why none came to it (cooling down
        # after failed requests, a failing health check, ...).
        after = gateway_client.worker_view(opts.gateway_url, ctx.keypair(),
                                           str(ctx.journal.genesis_hash))
        seen = "unknown" if after is None else \
            "live" if after.get("live") else f"not live: {after.get('reason')}"
        raise OpsError(f"{exc}; the gateway lists the worker as {seen}") from None
    facts["test_request_id"] = answer.request_id
    return Outcome(f"worker live at the gateway (models {', '.join(row['models'])}); test"
                   f" request {answer.request_id} answered by it", facts)


def _running(opts: Options, engine: bool = False) -> bool:
    if opts.container and not engine:
        return container.running(opts)
    return _status(_program(opts, engine))


def check(ctx: Context) -> str | None:
    """The worker's files are what this run would write (unless roles/worker deployed it),
    its program or unit runs, and the gateway lists it as live (asked again for
    ``LIVENESS_PATIENCE_S``: a stall the worker recovers from does not restart it)."""
    opts = ctx.options
    manifest = _manifest_path(ctx)
    if manifest is not None:
        if str(manifest) != ctx.facts.get("worker_manifest"):
            return f"the worker is now the one {manifest} records"
        program = _deployed(manifest)
        if not _status(program):
            return gone(ctx, f"{program.name} is not running ({program.manager})")
    else:
        expected = _files(ctx)
        if not opts.container:
            service_path, service_text = _service_file(opts)
            expected[service_path] = service_text.encode()
            if opts.model_path is not None:
                engine_path, engine_text = _service_file(opts, engine=True)
                expected[engine_path] = engine_text.encode()
                if not _running(opts, engine=True):
                    return gone(ctx, f"{opts.engine_program} is not running"
                                     f" ({opts.service_manager})")
        for path, content in expected.items():
            try:
                if path.read_bytes() != content:
                    return f"{path} differs from what this run would write"
            except FileNotFoundError:
                return gone(ctx, f"{path} is missing")
        if not _running(opts):
            manager = "docker" if opts.container else opts.service_manager
            return gone(ctx, f"{opts.program} is not running ({manager})")

    def listed() -> str | None:
        row = gateway_client.worker_view(opts.gateway_url, ctx.keypair(),
                                         str(ctx.journal.genesis_hash))
        if row is not None and row.get("live"):
            return None
        return "it does not know the worker" if row is None else str(row.get("reason"))[:200]

    why = patiently(ctx, listed)
    if why is None:
        return None
    return gone(ctx, f"the gateway {opts.gateway_url} does not list the worker as live ({why})")

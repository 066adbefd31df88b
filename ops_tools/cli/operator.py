"""``ops-tools operator``: onboard an operator end to end, and show where it stands.

The URLs and secrets default to the local network's (``ops-tools localnet up``); on the test
network give them (or the playbook ``playbooks/operator_worker.yml`` does).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import typer
from rich.markup import escape

from ops_tools.cli.output import err_console, print_json
from ops_tools.deploy import paths
from ops_tools.errors import InputError
from ops_tools.operator import report, runner, units
from ops_tools.operator import status as op_status
from ops_tools.operator.context import DEFAULT_SERVICE_USER, ROOT, TEST_ENGINE, Options
from ops_tools.wallet import inputs
from ops_tools.wallet.attest import ENV_ATTESTATION_URL
from ops_tools.wallet.faucet_client import resolve_faucet_url
from ops_tools.wallet.keystore import default_keystore_dir
from ops_tools.wallet.passphrase import resolve_passphrase
from ops_tools.wallet.rpc import resolve_rpc_url
from ops_tools.worker.config import ENGINE_KINDS, gguf_problem

app = typer.Typer(help="Operator onboarding: GPU, wallet, funds, attestation, stake, worker.",
                  no_args_is_help=True)

NameOpt = typer.Option(..., "--name", help="The operator's account name in the keystore.")
RpcOpt = typer.Option(None, "--rpc-url", help="Node WebSocket RPC (default $NET_RPC_URL, else"
                      " the local network's ws://127.0.0.1:9944).")
GatewayOpt = typer.Option(None, "--gateway-url", help="Gateway (default $NET_GATEWAY_URL, else"
                          " the local network's http://127.0.0.1:8005).")
KeystoreOpt = typer.Option(None, "--keystore", help="Keystore directory (default wallet-cli's).")
StateOpt = typer.Option(None, "--state-dir", help="Journal, worker configuration and secrets"
                        " (default ~/.local/state/net/operator/NAME).")
JsonOpt = typer.Option(False, "--json", help="Print the final report as JSON on stdout.")


def _gateway_url(flag: str | None) -> str:
    return (flag or os.environ.get("NET_GATEWAY_URL") or "http://127.0.0.1:8005").rstrip("/")


def _state_dir(flag: Path | None, name: str, service_manager: str) -> Path:
    if flag is not None:
        return flag.resolve()
    if service_manager == "systemd" and os.geteuid() == 0:
        # Root's home is closed to the worker's own user; the playbook's layout.
        return Path("/var/lib/net/operator") / name
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return base / "net" / "operator" / name


def _local(path: Path) -> Path | None:
    return path if path.is_file() else None


class RichDisplay:
    def skipped(self, title: str, detail: str) -> None:
        err_console.print(f"[green]✓[/] {title} [dim](done earlier, still true: {detail})[/]")

    def redoing(self, title: str, reason: str) -> None:
        err_console.print(f"[yellow]↻[/] {title}: done earlier, but {escape(reason)}; doing it"
                          " again", highlight=False)

    def started(self, title: str) -> None:
        err_console.print(f"[bold]▶ {title}[/]")

    def finished(self, title: str, detail: str) -> None:
        err_console.print(f"[green]✓[/] {title}: {detail}", highlight=False)

    def failed(self, title: str, error: str) -> None:
        err_console.print(f"[red]✗[/] {title} failed")

    def note(self, message: str) -> None:
        err_console.print(f"  {message}", markup=False, highlight=False)


def _model_file(path: Path, engine_kind: str | None, port: int,
                on_host: bool = True) -> tuple[Path, str]:
    """--model-path checked before anything is done: the file, the kind, the port, and (on the
    host; a container brings its own) llama.cpp's server at hand. Returns the absolute path and
    the engine's URL."""
    problem = gguf_problem(path)
    if problem:
        raise InputError(f"--model-path: {str(path)!r}: {problem}")
    if engine_kind not in (None, "llamacpp"):
        raise InputError(f"--engine-kind: {engine_kind!r} with --model-path: the onboarding"
                         " serves the file with llama.cpp (llamacpp); for another engine, start"
                         " it yourself and give --engine-url")
    if not 1 <= port <= 65535:
        raise InputError(f"--engine-port: {port}: a TCP port, 1 to 65535")
    if on_host and importlib.util.find_spec("llama_cpp") is None:
        raise InputError("--model-path: llama.cpp's server (llama-cpp-python) is not installed"
                         " beside ops-tools: pip install 'net-ops[llamacpp]', or run the engine"
                         " yourself and give --engine-url")
    return path.resolve(), f"http://127.0.0.1:{port}"


@app.command("onboard")
def onboard(
    name: str = NameOpt,
    passphrase_file: Path | None = typer.Option(
        None, "--passphrase-file", help="File holding the keystore passphrase (else"
        " $NET_WALLET_PASSPHRASE, else a prompt); never on the command line."),
    stake: int | None = typer.Option(None, "--stake", help="Stake in plancks (default MinStake)."),
    engine_url: str | None = typer.Option(None, "--engine-url", help="The inference engine"
                                          " (OpenAI-compatible base URL) the worker serves."),
    test_engine: bool = typer.Option(False, "--test-engine", help="Serve the built-in TEST"
                                     " ENGINE (no GPU, no weights; test network only)."),
    engine_kind: str | None = typer.Option(
        None, "--engine-kind", help="The engine's dialect: vllm, sglang, trtllm, llamacpp or"
        " openai (any OpenAI-compatible server, the default); docs/inference.md."),
    model_path: Path | None = typer.Option(
        None, "--model-path", help="A GGUF model file on this host: the onboarding runs"
        " llama.cpp's server for it on loopback (--engine-port; the llamacpp extra; with"
        " --container the image's own, the file mounted read-only) and the worker serves it"
        " (engine kind llamacpp; the first --model names it, default the file's name without"
        " .gguf)."),
    engine_port: int = typer.Option(8180, "--engine-port", help="With --model-path: the"
                                    " loopback port of llama.cpp's server."),
    model: list[str] = typer.Option([], "--model", help="Announce only these models."),
    no_gpu: bool = typer.Option(False, "--no-gpu", help="Record that the worker has no GPU"
                                " (test network only)."),
    rpc_url: str | None = RpcOpt,
    faucet_url: str | None = typer.Option(None, "--faucet-url", help="Faucet (default"
                                          " $NET_FAUCET_URL, else the local network's)."),
    attestation_url: str | None = typer.Option(
        None, "--attestation-url", help=f"Attestation service (default ${ENV_ATTESTATION_URL},"
        " else the local network's)."),
    gateway_url: str | None = GatewayOpt,
    gateway_key_file: Path | None = typer.Option(
        None, "--gateway-key-file", help="A gateway API key for the test request (default: the"
        " local network's development key)."),
    service_manager: str | None = typer.Option(
        None, "--service-manager", help="systemd or supervisor (default: supervisor when the"
        " local network's supervisord is there, else systemd)."),
    supervisor_conf: Path | None = typer.Option(
        None, "--supervisor-conf", help="supervisord.conf to add the worker to (default: the"
        " local network's)."),
    service_user: str | None = typer.Option(
        None, "--service-user", help=f"systemd: run the worker as this user (default"
        f" {DEFAULT_SERVICE_USER}, an unprivileged system user created when missing; 'root'"
        " only if you must, with a warning). supervisor: default the supervisord's user."),
    worker_host: str = typer.Option("127.0.0.1", "--worker-host", help="Worker listen address."),
    worker_port: int = typer.Option(8111, "--worker-port", help="Worker listen port."),
    worker_public_url: str | None = typer.Option(
        None, "--worker-public-url", help="The URL the gateway calls the worker at."),
    drain_timeout: int | None = typer.Option(
        None, "--drain-timeout", help="Seconds a stopping worker lets its requests in flight"
        " finish (default 60, at most 3600); the service manager or docker waits that plus the"
        " worker's shutdown before it kills it. Long generations need more."),
    keystore: Path | None = KeystoreOpt,
    state_dir: Path | None = StateOpt,
    timeout: float = typer.Option(180.0, "--timeout", help="Seconds each wait may take."),
    worker_manifest: Path | None = typer.Option(
        None, "--worker-manifest", help="The worker is deployed by roles/worker: its deployed"
        " manifest (service.json) names the program; onboarding installs no worker of its own"
        " and waits for that one (playbooks/operator_worker.yml)."),
    until: str | None = typer.Option(
        None, "--until", help="Stop after this step (the playbook deploys the worker after the"
        " stake step, then runs the rest)."),
    container: bool = typer.Option(False, "--container", help="Run the worker as a Docker"
                                   " container of --image (docs/containers.md) instead of a"
                                   " systemd unit or supervisor program."),
    image: str = typer.Option("net-worker:llamacpp", "--image", help="--container: the"
                              " worker's image (net-worker:llamacpp|vllm|sglang|trtllm)."),
    docker_host: str | None = typer.Option(None, "--docker-host", help="--container: the"
                                           " Docker daemon (default $DOCKER_HOST, else the"
                                           " system's)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask before acting."),
    json_out: bool = JsonOpt,
) -> None:
    """Onboard an operator: every step journaled; run again to continue where it stopped."""
    inputs.account_name(name)
    if sum((test_engine, engine_url is not None, model_path is not None)) != 1:
        raise InputError("--engine-url / --model-path / --test-engine: give exactly one (the"
                         " engine the worker serves, a GGUF model file to serve with llama.cpp,"
                         " or the built-in test engine on the test network)")
    if model_path is not None:
        model_path, engine_url = _model_file(model_path, engine_kind, engine_port,
                                             on_host=not container)
        engine_kind = "llamacpp"
    if engine_kind is not None and (engine_kind not in ENGINE_KINDS or engine_kind == "test"):
        raise InputError(f"--engine-kind: {engine_kind!r}: use one of vllm, sglang, trtllm,"
                         " llamacpp, openai (the test engine is --test-engine)")
    if engine_kind is not None and test_engine:
        raise InputError("--engine-kind: the built-in test engine has no other dialect; give"
                         " --engine-url with --engine-kind")
    if (image != "net-worker:llamacpp" or docker_host) and not container:
        raise InputError("--image / --docker-host: only with --container")
    if container and worker_manifest is not None:
        raise InputError("--worker-manifest / --container: give one (a worker that roles/worker"
                         " deployed, or the worker as a container of --image)")
    local = paths.localnet_dir()
    local_supervisor = _local(paths.supervisor_conf(local))
    if service_manager is None:
        service_manager = "supervisor" if local_supervisor or supervisor_conf else "systemd"
    if service_manager not in ("systemd", "supervisor"):
        raise InputError(f"--service-manager: {service_manager!r}: use systemd or supervisor")
    if worker_public_url is None and worker_host in ("0.0.0.0", "::"):  # noqa: S104
        raise InputError(f"--worker-public-url: none given while the worker listens on"
                         f" {worker_host}; give the URL the gateway reaches it at")
    if drain_timeout is not None and worker_manifest is not None:
        raise InputError("--drain-timeout: roles/worker deployed this worker; set"
                         " worker_drain_timeout_s in the operator's inventory instead")
    if drain_timeout is not None and not 1 <= drain_timeout <= units.DRAIN_TIMEOUT_MAX_S:
        raise InputError(f"--drain-timeout: {drain_timeout}: give seconds from 1 to"
                         f" {units.DRAIN_TIMEOUT_MAX_S}")
    if stake is not None and stake < 0:
        raise InputError(f"--stake: {stake}: a number of plancks, 0 or more")
    opts = Options(
        name=name,
        state_dir=_state_dir(state_dir, name, service_manager),
        keystore_dir=keystore or default_keystore_dir(),
        passphrase_file=passphrase_file,
        rpc_url=resolve_rpc_url(rpc_url),
        faucet_url=resolve_faucet_url(faucet_url),
        attestation_url=attestation_url or os.environ.get(ENV_ATTESTATION_URL)
        or "http://127.0.0.1:8002",
        gateway_url=_gateway_url(gateway_url),
        stake=stake,
        engine_url=TEST_ENGINE if test_engine else str(engine_url).rstrip("/"),
        engine_kind=engine_kind,
        model_path=model_path,
        engine_port=engine_port,
        models=model,
        no_gpu=no_gpu,
        gateway_key_file=gateway_key_file
        or _local(local / "gateway-0" / "secrets" / "dev_api_key"),
        service_manager=service_manager,
        supervisor_conf=supervisor_conf or local_supervisor,
        service_user=service_user,
        worker_host=worker_host,
        worker_port=worker_port,
        worker_public_url=worker_public_url,
        drain_timeout_s=drain_timeout or Options.drain_timeout_s,
        timeout_s=timeout,
        worker_manifest=worker_manifest,
        container=container,
        container_image=image,
        docker_host=docker_host,
    )
    if opts.run_as == ROOT and worker_manifest is None:
        err_console.print(f"warning: --service-user root: the worker, which talks to the"
                          f" network and holds the operator's key, will run as root; leave the"
                          f" option out to run it as {DEFAULT_SERVICE_USER}", markup=False,
                          highlight=False)
    if not yes and not json_out and err_console.is_terminal:
        what = (f"a container of {image}" if container
                else f"the worker {worker_manifest} records" if worker_manifest is not None
                else f"a {service_manager} service")
        typer.confirm(f"Onboard operator {name!r} on {opts.rpc_url} (stake, faucet drip,"
                      f" {what})?", abort=True)
    result = runner.onboard(opts, RichDisplay(), until=until)
    out = report.onboarding_report(result.journal, result.ran, result.skipped,
                                      result.redone)
    report.save(opts.state_dir / "report.json", out)
    if json_out:
        print_json(out)
        return
    err_console.print(f"operator {name} onboarded: account {out['account']}, stake"
                      f" {out['stake']}, attestation {out['attestation_hash']}, worker"
                      f" {out['worker_url']} ({', '.join(out['models'])}); journal"
                      f" {out['journal']}", markup=False, highlight=False)


@app.command("status")
def status(
    name: str = NameOpt,
    rpc_url: str | None = RpcOpt,
    gateway_url: str | None = GatewayOpt,
    indexer_url: str | None = typer.Option(
        None, "--indexer-url", help="Indexer for earnings (default $NET_INDEXER_URL, else the"
        " local network's http://127.0.0.1:8004)."),
    faucet_url: str | None = typer.Option(None, "--faucet-url", help="Faucet (its drips are"
                                          " not earnings)."),
    passphrase_file: Path | None = typer.Option(
        None, "--passphrase-file", help="File holding the keystore passphrase (else"
        " $NET_WALLET_PASSPHRASE, else a prompt): the gateway shows a worker only to a request"
        " its operator's key signed."),
    keystore: Path | None = KeystoreOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Registration, stake, last heartbeat epoch vs the current one, liveness, earnings."""
    inputs.account_name(name)
    out = op_status.status(
        name, keystore or default_keystore_dir(), resolve_rpc_url(rpc_url),
        _gateway_url(gateway_url),
        (indexer_url or os.environ.get("NET_INDEXER_URL") or "http://127.0.0.1:8004").rstrip("/"),
        resolve_faucet_url(faucet_url),
        passphrase=lambda: resolve_passphrase(passphrase_file, confirm=False))
    if json_out:
        print_json(out)
        return
    view = out["gateway_view"] or {}
    earned = out.get("earnings_settled") or {}
    for label, value in (
        ("account", out["account"]),
        ("registered", f"{out['registered']} (stake {out['stake']}, block {out['registered_at']})"),
        ("heartbeat", f"last epoch {out['last_heartbeat_epoch']}, current"
                      f" {out['current_epoch']}: {out['heartbeat']}"),
        ("gateway", "live" if out["worker_live"] else f"not live ({view.get('reason')})"),
        ("models", ", ".join(view.get("models", [])) or "-"),
        ("earnings settled", f"{earned.get('plancks', '?')} plancks in"
                             f" {earned.get('transfers', '?')} transfer(s)"),
    ):
        err_console.print(f"{label:17} {value}", markup=False, highlight=False)

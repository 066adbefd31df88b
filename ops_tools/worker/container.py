"""``net-worker-container``: the entry point of the worker's container images
(containers/worker/Dockerfile, docs/containers.md).

Everything comes in as mounted files, never as environment variables or arguments: the worker's
settings at ``<config-dir>/worker.yml`` (its ``passphrase_file`` and ``keystore_dir`` point at
mounted files or Docker secrets), and optionally the engine beside it at
``<config-dir>/engine.yml``: ``argv`` (the engine's server command, for the GPU variants), else
``net-local-engine`` with that file (the llamacpp variant: ``kind: llamacpp``, ``model_path``,
``listen_port``, ...).

PID 1 of the container: it starts the engine, waits until it lists its models, then starts the
worker. ``docker stop`` (SIGTERM) goes to the worker first, which drains (its requests in flight
finish, ``ops_tools/worker/drain.py``); the engine is stopped only after the worker exited.
``--health`` is the image's HEALTHCHECK: the worker's ``/health`` answers 200."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import FrameType
from typing import Any

import yaml

from ops_tools.errors import InputError, OpsError
from ops_tools.worker import listen

CONFIG_DIR = Path("/etc/net-worker")
ENGINE_STOP_S = 30.0
POLL_S = 0.5


def _executable(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def engine_plan(path: Path) -> tuple[list[str], float]:
    """The engine's argv and how long it may take to list its models (loading weights)."""
    try:
        data: Any = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"engine.yml: cannot read {path} ({exc}); mount a YAML file") from exc
    if not isinstance(data, dict):
        raise InputError(f"engine.yml: {path} is not a YAML mapping")
    timeout = data.get("start_timeout_s", 600)
    if not isinstance(timeout, int | float) or not 0 < timeout <= 7200:
        raise InputError(f"engine.yml: start_timeout_s: {timeout!r}: seconds, 1 to 7200")
    argv = data.get("argv")
    if argv is None:
        return [_executable("net-local-engine"), "--config", str(path)], float(timeout)
    if not (isinstance(argv, list) and argv and len(argv) <= 256
            and all(isinstance(a, str) for a in argv)):
        raise InputError(f"engine.yml: argv: {argv!r}: a list of strings, the engine's command")
    return list(argv), float(timeout)


def _answers(url: str, timeout: float = 5.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (http URL)
            return bool(response.status == 200)
    except (OSError, ValueError):
        return False


class Launcher:
    def __init__(self, config_dir: Path) -> None:
        self.config_dir = config_dir
        self.engine: subprocess.Popen[bytes] | None = None
        self.worker: subprocess.Popen[bytes] | None = None
        self.stopping = False

    def on_signal(self, sig: int, frame: FrameType | None) -> None:
        first = not self.stopping
        self.stopping = True
        if self.worker is not None and self.worker.poll() is None:
            # The worker drains on the first signal and stops at once on the second.
            self.worker.send_signal(signal.SIGTERM if first else signal.SIGINT)

    def _stop_engine(self) -> None:
        engine = self.engine
        if engine is None or engine.poll() is not None:
            return
        engine.terminate()
        try:
            engine.wait(ENGINE_STOP_S)
        except subprocess.TimeoutExpired:
            engine.kill()
            engine.wait()

    def _wait_engine(self, url: str, timeout_s: float) -> bool:
        assert self.engine is not None
        deadline = time.monotonic() + timeout_s
        while not self.stopping:
            if self.engine.poll() is not None:
                raise OpsError(f"the engine exited ({self.engine.returncode}) before it"
                               f" answered {url}")
            if _answers(url):
                return True
            if time.monotonic() > deadline:
                raise OpsError(f"the engine did not answer {url} within {timeout_s:g} s")
            time.sleep(1)
        return False

    def run(self) -> int:
        from ops_tools.worker import config as settings  # not for --health (below)

        worker_yml = self.config_dir / "worker.yml"
        s = settings.load(worker_yml, {})  # bad settings fail here, before the engine loads
        engine_yml = self.config_dir / "engine.yml"
        try:
            if engine_yml.is_file():
                argv, timeout_s = engine_plan(engine_yml)
                self.engine = subprocess.Popen(argv)
                if not self._wait_engine(f"{s.engine_url}/v1/models", timeout_s):
                    return 0  # stopped while the engine loaded
            self.worker = subprocess.Popen(
                [_executable("net-worker"), "--config", str(worker_yml)])
            while True:
                code = self.worker.poll()
                if code is not None:
                    # SIGTERM's own exit (uvicorn re-raises the signal) is a clean stop here.
                    return 0 if self.stopping and code in (0, -signal.SIGTERM) else code or 1
                if self.engine is not None and self.engine.poll() is not None:
                    print(f"net-worker-container: the engine exited ({self.engine.returncode});"
                          " stopping the worker", file=sys.stderr)
                    self.on_signal(signal.SIGTERM, None)
                    self.worker.wait()
                    return 1
                time.sleep(POLL_S)
        finally:
            if self.worker is not None and self.worker.poll() is None:
                self.worker.kill()
                self.worker.wait()
            self._stop_engine()


def health(config_dir: Path) -> int:
    """The HEALTHCHECK: Docker runs it every 15 s beside the engine and gives it 5 s, on a host
    that may be busy. It reads only the listen address from worker.yml (the launcher validated
    the whole file at start) and imports nothing of the settings model, whose imports alone took
    most of those 5 s on a loaded machine."""
    try:
        data = yaml.safe_load((config_dir / "worker.yml").read_text())
    except (OSError, yaml.YAMLError):
        return 1
    if not isinstance(data, dict):
        return 1
    host = data.get("listen_host", listen.DEFAULT_HOST)
    port = data.get("listen_port", listen.DEFAULT_PORT)
    if not (isinstance(host, str) and isinstance(port, int) and 0 < port < 65536):
        return 1
    host = "127.0.0.1" if host in ("0.0.0.0", "::") else host  # noqa: S104
    return 0 if _answers(f"http://{host}:{port}/health") else 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="net-worker-container",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--config-dir", type=Path, default=CONFIG_DIR)
    parser.add_argument("--health", action="store_true", help="the HEALTHCHECK: exit 0 when"
                        " the worker's /health answers 200")
    args = parser.parse_args(argv)
    try:
        if args.health:
            raise SystemExit(health(args.config_dir))
        launcher = Launcher(args.config_dir)
        signal.signal(signal.SIGTERM, launcher.on_signal)
        signal.signal(signal.SIGINT, launcher.on_signal)
        raise SystemExit(launcher.run())
    except OpsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2 if isinstance(exc, InputError) else 1) from None

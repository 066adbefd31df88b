"""What every step sees: the options, the journal, the keystore, and the chain on demand.

Secrets live here in memory only: the passphrase is read once (file or prompt) when a step
first needs it; the chain connection is opened when a step first needs it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from substrateinterface import Keypair, SubstrateInterface

from ops_tools.operator.journal import Journal
from ops_tools.wallet import rpc
from ops_tools.wallet.keystore import Keystore
from ops_tools.wallet.passphrase import resolve_passphrase

TEST_ENGINE = "test"


DEFAULT_SERVICE_USER = "net-worker"
ROOT = "root"


@dataclass
class Options:
    name: str
    state_dir: Path
    keystore_dir: Path
    passphrase_file: Path | None
    rpc_url: str
    faucet_url: str
    attestation_url: str
    gateway_url: str
    stake: int | None = None  # None: MinStake
    engine_url: str = TEST_ENGINE  # "test" (--test-engine) or an OpenAI-compatible engine's URL
    engine_kind: str | None = None  # the engine's dialect (--engine-kind); None: the worker's
    # A GGUF model file (--model-path): the onboarding runs llama.cpp's server for it on
    # loopback engine_port (its own program beside the worker's; with --container, the
    # container's own engine) and engine_url points there.
    model_path: Path | None = None
    engine_port: int = 8180
    models: list[str] = field(default_factory=list)
    no_gpu: bool = False
    # An API key of the gateway for the test request; None: no test request.
    gateway_key_file: Path | None = None
    service_manager: str = "systemd"  # systemd | supervisor
    supervisor_conf: Path | None = None
    systemd_unit_dir: Path = Path("/etc/systemd/system")
    # None: systemd runs the worker as DEFAULT_SERVICE_USER, supervisord as its own user;
    # "root" only when asked for (the CLI warns).
    service_user: str | None = None
    worker_executable: Path = field(
        default_factory=lambda: Path(sys.executable).with_name("net-worker"))
    worker_host: str = "127.0.0.1"
    worker_port: int = 8111
    worker_public_url: str | None = None
    # How long the worker lets requests in flight finish on SIGTERM (--drain-timeout); the
    # service manager's stop timeout is derived from it (units.stop_timeout_s).
    drain_timeout_s: int = 60
    timeout_s: float = 180.0
    rpc_timeout_s: float = 60.0
    # The worker is deployed by roles/worker (playbooks/operator_worker.yml): its deployed
    # manifest names the program; the daemon step installs nothing and waits for it.
    worker_manifest: Path | None = None
    # --container: the worker as a Docker container of this image (docs/containers.md) instead
    # of a systemd unit or supervisor program; docker_host None: $DOCKER_HOST, else the default.
    container: bool = False
    container_image: str = "net-worker:llamacpp"
    docker_host: str | None = None

    @property
    def journal_path(self) -> Path:
        return self.state_dir / "journal.json"

    @property
    def secrets_dir(self) -> Path:
        return self.state_dir / "secrets"

    @property
    def program(self) -> str:
        return f"net-worker-{self.name}"

    @property
    def container_dir(self) -> Path:
        return self.state_dir / "container"

    @property
    def engine_program(self) -> str:
        """The llama.cpp server's program (with --model-path)."""
        return f"net-engine-{self.name}"

    @property
    def run_as(self) -> str | None:
        """The worker's Unix user; None: the supervisord's own."""
        if self.service_user:
            return self.service_user
        return DEFAULT_SERVICE_USER if self.service_manager == "systemd" else None

    def worker_url(self) -> str:
        return (self.worker_public_url or f"http://{self.worker_host}:{self.worker_port}").rstrip("/")


Emit = Callable[[str], None]


@dataclass
class Context:
    options: Options
    journal: Journal
    emit: Emit = lambda _msg: None
    # Set by the preflight when the chain no longer has the blocks the journal saw: the network
    # was re-created with the same genesis (``localnet down --purge`` then ``up``).
    recreated: bool = False
    _passphrase: str | None = None
    _substrate: SubstrateInterface | None = None
    _keypair: Keypair | None = None

    @property
    def keystore(self) -> Keystore:
        return Keystore(self.options.keystore_dir)

    @property
    def facts(self) -> dict[str, Any]:
        return self.journal.facts

    def passphrase(self, *, confirm: bool = False) -> str:
        if self._passphrase is None:
            self._passphrase = resolve_passphrase(self.options.passphrase_file, confirm=confirm)
        return self._passphrase

    def keypair(self) -> Keypair:
        if self._keypair is None:
            self._keypair = self.keystore.unlock_hotkey(self.options.name, self.passphrase())
        return self._keypair

    def substrate(self) -> SubstrateInterface:
        if self._substrate is None:
            self._substrate = rpc.connect(self.options.rpc_url, self.options.rpc_timeout_s)
        return self._substrate

    def close(self) -> None:
        if self._substrate is not None:
            self._substrate.close()
            self._substrate = None

"""Fixtures of the operator suite: a real sshd on a loopback address, a small network of two
development-node authorities, and playbooks/full_node.yml run through paramiko against the
"remote" host (this machine, reached over SSH).

OPERATOR_PLAY_LOG=<file> appends every play's output to that file (for debugging a failure)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import http.server
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from ops_tools.chainspec.runtime import build_runtime_blob
from ops_tools.checksums import sha256_file
from ops_tools.deploy.supervisor_rpc import Supervisor, SupervisorError
from ops_tools.devnode.runtime.blob import VERSION
from tests.conftest import ROOT, free_port

# The shared cases of the two onboarding lanes are test code in a helper module: their failed
# asserts show their operands as a test module's do.
pytest.register_assert_rewrite("tests.operator.onboard_e2e_cases")

VENV_BIN = ROOT / ".venv" / "bin"
DEVNODE = VENV_BIN / "devnode"
PYTHON = VENV_BIN / "python"
LOCAL_NETWORK = ROOT / "chainspec" / "networks" / "local.yml"
SSH_HOST = "127.0.0.2"
HOST = "operator-full-0"

# Development secrets of local.yml's authorities (public knowledge: chainspec/networks/README.md).
AUTHORITIES = {
    "authority-0": ("//Alice", "a2cc9425a5480a81c81ae322ec325170eea0837b465236606ff462a1824e5583"),
    "authority-1": ("//Bob", "c91fcc4eded70da1abd1b3a4b1ef3bc303b9e308ecbc598efa3a8a92571fca07"),
}
RECAP = re.compile(
    r"^(?P<host>\S+)\s*:\s*ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+"
    r"unreachable=(?P<unreachable>\d+)\s+failed=(?P<failed>\d+)",
    re.MULTILINE,
)


def rpc(url: str, method: str, params: list | None = None, timeout: float = 3.0) -> object:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []})
    req = urllib.request.Request(
        url, data=body.encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())["result"]


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if predicate():
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.3)


def stop_group(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)
    except ProcessLookupError:
        pass


@dataclass(frozen=True)
class Rendered:
    """One render of local.yml: its raw spec and what the render manifest says about it."""

    raw: Path
    genesis: str
    sha256: str


def render(out: Path, network: Path, runtime: Path | None = None) -> Rendered:
    cmd = [str(VENV_BIN / "ops-tools"), "chainspec", "render", "--network", str(network),
           "--node", str(DEVNODE), "--out", str(out)]
    if runtime is not None:
        cmd += ["--runtime", str(runtime)]
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT, timeout=120)
    manifest = json.loads((out / "manifest.json").read_text())
    return Rendered(out / "raw.json", manifest["genesis_hash"], manifest["raw_spec_sha256"])


def unhanded_port(taken: set[int]) -> int:
    """A TCP port below the kernel's ephemeral range (32768 up), free now. No bind to port 0 or
    outgoing connection ever gets one there, so it stays free for the whole session while the
    servers that use it stop and start (``free_port()`` keeps its port for a minute only)."""
    rng = random.Random()  # spreads concurrent sessions apart; no secret
    for _ in range(200):
        port = rng.randrange(20000, 30000)
        if port in taken:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        taken.add(port)
        return port
    raise RuntimeError("no free TCP port in 20000-29999 on 127.0.0.1")


@pytest.fixture(scope="session")
def authority_ports() -> dict[str, int]:
    """The p2p ports of the two authorities of every ``LocalNet`` of this session."""
    taken: set[int] = set()
    return {name: unhanded_port(taken) for name in AUTHORITIES}


@pytest.fixture(scope="session")
def specs(tmp_path_factory: pytest.TempPathFactory,
          authority_ports: dict[str, int]) -> dict[str, Rendered]:
    """'current': local.yml with the node's own runtime; 'other': the same network with another
    runtime (spec version 7), i.e. what a different pallet-suite revision gives.

    Both are rendered with the authorities' addresses on ``authority_ports``: local.yml's own
    are the local network's fixed ports (``localnet up``), and a node of this genesis that
    dialled them (from the spec's bootNodes) would join that network if it runs beside."""
    base = tmp_path_factory.mktemp("specs")
    network = yaml.safe_load(LOCAL_NETWORK.read_text())
    for authority in network["authorities"]:
        authority["address"] = f"/ip4/127.0.0.1/tcp/{authority_ports[authority['name']]}"
    definition = base / "local.yml"
    definition.write_text(yaml.safe_dump(network, sort_keys=False))
    blob = base / "runtime-v7.wasm"
    other_version = dataclasses.replace(VERSION, spec_version=VERSION.spec_version + 1)
    blob.write_bytes(build_runtime_blob(other_version, extra_sections={"test": b"other"}))
    current = render(base / "current", definition)
    other = render(base / "other", definition, blob)
    assert current.genesis != other.genesis
    return {"current": current, "other": other}


@dataclass
class LocalNet:
    """Two authorities of local.yml as plain devnode processes on loopback: p2p on the ports
    that ``specs`` put in the spec, RPC on free ones."""

    root: Path
    keystores: Path
    p2p: dict[str, int]
    procs: list[subprocess.Popen] = field(default_factory=list)
    rpc_ports: dict[str, int] = field(default_factory=dict)
    peer_ids: dict[str, str] = field(default_factory=dict)
    starts: int = 0

    def __post_init__(self) -> None:
        network = yaml.safe_load(LOCAL_NETWORK.read_text())
        self.peer_ids = {a["name"]: a["peer_id"] for a in network["authorities"]}
        self.rpc_ports = {name: free_port() for name in AUTHORITIES}

    @property
    def bootnodes(self) -> list[str]:
        return [f"/ip4/127.0.0.1/tcp/{self.p2p[n]}/p2p/{self.peer_ids[n]}" for n in AUTHORITIES]

    @property
    def rpc_url(self) -> str:
        """The network's 'public' endpoint, as an operator would be given it (ws://)."""
        return f"ws://127.0.0.1:{self.rpc_ports['authority-0']}"

    def http(self, name: str = "authority-0") -> str:
        return f"http://127.0.0.1:{self.rpc_ports[name]}"

    def start(self, spec: Rendered) -> None:
        """A fresh chain from ``spec`` (a network reset starts from empty databases)."""
        self.starts += 1
        for name, (_suri, node_key) in AUTHORITIES.items():
            base = self.root / f"run{self.starts}" / name
            shutil.copytree(self.keystores / name, base)
            key_file = base / "node.key"
            key_file.write_text(node_key)
            key_file.chmod(0o600)
            others = [b for b in self.bootnodes if self.peer_ids[name] not in b]
            log = (base / "node.log").open("wb")
            self.procs.append(subprocess.Popen(
                [str(DEVNODE), "--chain", str(spec.raw), "--base-path", str(base), "--name", name,
                 "--validator", "--rpc-port", str(self.rpc_ports[name]),
                 "--port", str(self.p2p[name]), "--node-key-file", str(key_file),
                 "--no-prometheus", "--bootnodes", *others],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            ))
            log.close()
        wait_for(lambda: rpc(self.http(), "chain_getBlockHash", [0]) == spec.genesis, 30,
                 "the authorities to serve the spec's genesis")

    def stop(self) -> None:
        for proc in self.procs:
            stop_group(proc)
        self.procs.clear()


@pytest.fixture(scope="session")
def keystores(tmp_path_factory: pytest.TempPathFactory, specs: dict[str, Rendered]) -> Path:
    """Base paths holding only the authorities' session keys (inserted once, copied per start;
    both renders share the chain id, hence the keystore's place)."""
    root = tmp_path_factory.mktemp("keystores")
    inserts = []
    for name, (suri, _node_key) in AUTHORITIES.items():
        for scheme, key_type in (("Sr25519", "aura"), ("Ed25519", "gran")):
            proc = subprocess.Popen(
                [str(DEVNODE), "key", "insert", "--chain", str(specs["current"].raw),
                 "--base-path", str(root / name), "--scheme", scheme, "--key-type", key_type],
                stdin=subprocess.PIPE, text=True,
            )
            proc.stdin.write(suri + "\n")  # the secret goes through stdin, never argv
            proc.stdin.close()
            inserts.append(proc)
    assert all(p.wait(timeout=60) == 0 for p in inserts)
    return root


@pytest.fixture
def localnet(tmp_path: Path, keystores: Path,
             authority_ports: dict[str, int]) -> Iterator[LocalNet]:
    net = LocalNet(tmp_path / "localnet", keystores, authority_ports)
    try:
        yield net
    finally:
        net.stop()


@dataclass
class Sshd:
    """An OpenSSH server on a loopback address: host key, client key and config all throwaway."""

    root: Path
    host: str = SSH_HOST
    port: int = 0
    proc: subprocess.Popen | None = None

    @property
    def client_key(self) -> Path:
        return self.root / "client_key"

    @property
    def home(self) -> Path:
        """HOME of the controller in tests: its ~/.ssh/known_hosts holds the server's key."""
        return self.root / "home"

    def start(self) -> None:
        self.port = free_port(self.host)
        for name in ("host_key", "client_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f",
                            str(self.root / name)], check=True, timeout=30)
        authorized = self.root / "authorized_keys"
        authorized.write_text((self.root / "client_key.pub").read_text())
        authorized.chmod(0o600)
        config = self.root / "sshd_config"
        config.write_text(
            f"ListenAddress {self.host}:{self.port}\n"
            f"HostKey {self.root / 'host_key'}\n"
            f"PidFile {self.root / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {authorized}\n"
            "PubkeyAuthentication yes\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
            "PermitRootLogin prohibit-password\nSubsystem sftp internal-sftp\n"
            # Bash sources ~/.bashrc for commands run by sshd at shell level 1; this machine's
            # root .bashrc runs `pyenv init` (about a second), paid 5 times per task.
            "SetEnv SHLVL=1\n"
        )
        # Debian's sshd refuses to start without its privilege separation directory.
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        ssh_dir = self.home / ".ssh"
        ssh_dir.mkdir(parents=True)
        host_pub = (self.root / "host_key.pub").read_text().split()
        (ssh_dir / "known_hosts").write_text(
            f"[{self.host}]:{self.port} {host_pub[0]} {host_pub[1]}\n"
        )
        log = (self.root / "sshd.log").open("wb")
        self.proc = subprocess.Popen(
            ["/usr/sbin/sshd", "-D", "-e", "-f", str(config)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        log.close()
        wait_for(lambda: "Server listening" in (self.root / "sshd.log").read_text(), 15,
                 f"sshd on {self.host}:{self.port}")

    def stop(self) -> None:
        if self.proc is not None:
            stop_group(self.proc)


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    server = Sshd(tmp_path_factory.mktemp("sshd"))
    try:
        server.start()
        yield server
    finally:
        server.stop()


@dataclass
class ArtifactServer:
    """Artifacts published over HTTP on loopback, as an operator would download them."""

    root: Path
    port: int
    server: http.server.ThreadingHTTPServer

    def publish(self, source: Path, name: str) -> str:
        target = self.root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        return f"http://127.0.0.1:{self.port}/{name}"


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArtifactServer]:
    root = tmp_path_factory.mktemp("artifacts")
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield ArtifactServer(root, server.server_address[1], server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@dataclass
class PlayResult:
    rc: int
    stdout: str
    stderr: str

    @property
    def recap(self) -> dict[str, dict[str, int]]:
        return {m["host"]: {k: int(m[k]) for k in ("ok", "changed", "unreachable", "failed")}
                for m in RECAP.finditer(self.stdout)}

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@dataclass(frozen=True)
class Installed:
    """The collection as an operator has it: installed under ``collections`` (an
    ANSIBLE_COLLECTIONS_PATH), its example inventory copied to ``inventory``, and ``workdir``,
    the directory the operator runs ansible-playbook from (not the checkout)."""

    collections: Path
    inventory: Path
    workdir: Path


@dataclass
class Operator:
    """The operator's controller and the remote host's state (a tmp dir reached over SSH)."""

    root: Path
    sshd: Sshd
    rpc_port: int = field(default_factory=free_port)
    p2p_port: int = field(default_factory=free_port)

    @property
    def node_root(self) -> Path:
        return self.root / "remote" / HOST

    @property
    def supervisor_root(self) -> Path:
        return self.root / "remote" / "supervisor"

    @property
    def rpc_url(self) -> str:
        return f"http://127.0.0.1:{self.rpc_port}"

    def inventory(self, spec: Rendered, bootnodes: list[str], extra: dict) -> Path:
        host = {
            "ansible_host": self.sshd.host,
            "ansible_port": self.sshd.port,
            "ansible_user": "root",
            "ansible_connection": "paramiko",
            "ansible_become": False,
            "ansible_pipelining": True,
            "ansible_ssh_private_key_file": str(self.sshd.client_key),
            "ansible_python_interpreter": str(PYTHON),
            "ansible_remote_tmp": str(self.root / "remote-tmp"),
            "genesis_preflight_binary_src": str(DEVNODE),
            "genesis_preflight_binary_sha256": sha256_file(DEVNODE),
            "genesis_preflight_chainspec_src": str(spec.raw),
            "genesis_preflight_chainspec_sha256": spec.sha256,
            "genesis_preflight_rpc_timeout": 3,
            "genesis_preflight_cache_dir": str(self.root / "controller-cache"),
            "node_root_dir": str(self.node_root),
            "node_service_manager": "supervisor",
            "node_supervisor_root_dir": str(self.supervisor_root),
            "node_manage_user": False,
            "node_service_user": "",
            "node_rpc_port": self.rpc_port,
            "node_p2p_port": self.p2p_port,
            "node_prometheus_enabled": False,
            "node_bootnodes": bootnodes,
            "full_node_sync_timeout": 60,
            # The role's 30 s for the first imported block is an operator's machine's; here the
            # node syncs beside other suites on two shared cores (xdist workers, other runs).
            "node_ready_block_timeout": 120,
            **extra,
        }
        path = self.root / "hosts.yml"
        tree = {"all": {"children": {"full_nodes": {"hosts": {HOST: host}}}}}
        path.write_text(yaml.safe_dump(tree))
        return path

    def play(self, spec: Rendered, public_url: str | None, bootnodes: list[str] | None = None,
             *, installed: Installed | None = None, **extra: object) -> PlayResult:
        """Run playbooks/full_node.yml with the example inventory's group vars plus this host;
        with ``installed``, ``net.ops.full_node`` of an installed collection, from its own
        directory and with its copy of the example inventory, as an operator does."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "NET_"))}
        env.update(HOME=str(self.sshd.home), ANSIBLE_NOCOLOR="1", PYTHONUNBUFFERED="1")
        if public_url is not None:
            env["NET_RPC_URL"] = public_url
        inventory = self.inventory(spec, bootnodes or [], extra)
        cwd, example, playbook = ROOT, "inventories/operator", "playbooks/full_node.yml"
        if installed is not None:
            env["ANSIBLE_COLLECTIONS_PATH"] = str(installed.collections)
            cwd, example = installed.workdir, str(installed.inventory)
            playbook = "net.ops.full_node"
        proc = subprocess.run(
            [str(VENV_BIN / "ansible-playbook"), "-i", example, "-i", str(inventory),
             "--limit", HOST, playbook],
            cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
        )
        if os.environ.get("OPERATOR_PLAY_LOG"):
            with open(os.environ["OPERATOR_PLAY_LOG"], "a") as log:
                log.write(proc.stdout + proc.stderr)
        return PlayResult(proc.returncode, proc.stdout, proc.stderr)

    def nothing_installed(self) -> bool:
        return not self.node_root.exists() and not self.supervisor_root.exists()

    def stop(self) -> None:
        conf = self.supervisor_root / "supervisord.conf"
        pidfile = self.supervisor_root / "supervisord.pid"
        if conf.exists():
            with contextlib.suppress(SupervisorError):
                Supervisor(conf).shutdown()
        if pidfile.exists():
            # supervisord removes its pid file on exit; one that outlives the shutdown is killed.
            pid = int(pidfile.read_text().strip() or 0)
            deadline = time.monotonic() + 30
            while pid and pidfile.exists() and time.monotonic() < deadline:
                time.sleep(0.2)
            if pid and pidfile.exists():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


@pytest.fixture
def operator(sshd: Sshd) -> Iterator[Operator]:
    # A short root: supervisord's control socket lives under it, and AF_UNIX paths end at 107
    # bytes, which pytest's tmp_path would exceed.
    op = Operator(Path(tempfile.mkdtemp(prefix="netop-")), sshd)
    try:
        yield op
    finally:
        op.stop()
        shutil.rmtree(op.root, ignore_errors=True)


@pytest.fixture(scope="session")
def ports_net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Every service onboarding talks to, on free loopback ports (onboard_stacks.ports_stack);
    shared by the onboarding end to end and the refusal tests."""
    from tests.operator.onboard_stacks import ports_stack

    with ports_stack(tmp_path_factory.mktemp("onboard-ports"), ONBOARD_PASSPHRASE) as net:
        yield net


ONBOARD_PASSPHRASE = "onboarding test passphrase 7f3a"

"""Run configuration and the on-disk layout.

As Substrate's: ``<base>/chains/<id>/{db,keystore,network}``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ops_tools.errors import InputError


def default_base() -> Path:
    """~/.local/share/devnode, looked up only when no --base-path is given: a service user without
    a home (systemd's DynamicUser, a system account) runs fine with --base-path or --tmp."""
    try:
        return Path.home() / ".local" / "share" / "devnode"
    except RuntimeError as exc:
        raise InputError(
            "--base-path: no home directory to put the default in; give --base-path DIR"
        ) from exc

_MULTIADDR = re.compile(r"^/(ip4|dns|dns4)/([^/]+)/tcp/(\d+)(?:/p2p/(\w+))?$")


@dataclass(frozen=True)
class ChainPaths:
    base: Path
    chain_id: str

    @property
    def chain_dir(self) -> Path:
        return self.base / "chains" / self.chain_id

    @property
    def db(self) -> Path:
        return self.chain_dir / "db"

    @property
    def keystore(self) -> Path:
        return self.chain_dir / "keystore"

    @property
    def node_key(self) -> Path:
        return self.chain_dir / "network" / "secret_ed25519"


def parse_multiaddr(text: str, what: str) -> tuple[str, int, str | None]:
    """``/ip4/<ip>/tcp/<port>[/p2p/<peer id>]`` to (host, port, peer id)."""
    m = _MULTIADDR.match(text.strip())
    if not m or not 0 < int(m[3]) < 65536:
        raise InputError(f"{what} {text!r}: expected /ip4/<address>/tcp/<port>[/p2p/<peer id>]")
    return m[2], int(m[3]), m[4]


@dataclass
class NodeConfig:
    chain: str
    base_path: Path
    name: str
    validator: bool = False
    rpc_host: str = "127.0.0.1"
    rpc_port: int = 9944
    rpc_methods: str = "auto"
    rpc_cors: list[str] | None = field(
        default_factory=lambda: ["http://localhost", "http://127.0.0.1"]
    )
    rpc_max_request: int = 15 * 1024 * 1024
    p2p_host: str = "127.0.0.1"
    p2p_port: int = 30333
    prometheus_host: str = "127.0.0.1"
    prometheus_port: int | None = 9615
    node_key_file: Path | None = None
    bootnodes: list[str] = field(default_factory=list)
    force_node_key_generation: bool = False
    tmp: bool = False
    finality_delay_ms: int | None = None  # None: half a slot, at most 1 s

    @property
    def allow_unsafe(self) -> bool:
        if self.rpc_methods == "unsafe":
            return True
        if self.rpc_methods == "safe":
            return False
        return self.rpc_host in ("127.0.0.1", "localhost", "::1")  # auto: loopback only

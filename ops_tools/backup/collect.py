"""Reading what a backup saves into members: key files, keystores, a consistent online copy of
each service database (SQLite's backup API, ``pg_dump``), the release the nodes run."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ops_tools.backup.hostio import LOCAL, HostIO
from ops_tools.backup.locate import Deployment, NodeSite, ServiceSite
from ops_tools.backup.manifest import Member, check_component, sha256
from ops_tools.errors import OpsError

MAX_KEY_BYTES = 64 * 1024
MAX_KEYSTORE_FILES = 1000
MAX_DATABASE_BYTES = 512 * 1024 * 1024
MAX_RELEASE_FILE_BYTES = 512 * 1024 * 1024
DUMP_TIMEOUT_S = 600
# Substrate's keystore file names: hex(key type, 4 bytes) + hex(public key).
KEYSTORE_NAME = re.compile(r"^[0-9a-f]{8}[0-9a-f]{2,256}$")


def read_bounded(path: Path, limit: int, what: str, io: HostIO = LOCAL) -> bytes:
    data = io.read(path, limit, what)
    if data is None:
        raise OpsError(f"{what}: {path} does not exist on {io.where}; re-converge the host"
                       " (playbooks/site.yml), or leave it out (--host)")
    return data


def node_key(node: NodeSite) -> Member:
    path = node.node_key_path
    return Member(f"nodes/{node.host}/node_key", "node_key", node.host,
                  read_bounded(path, MAX_KEY_BYTES, f"{node.host}'s node key", node.io),
                  {"peer_id": node.manifest.get("peer_id")})


def keystore(node: NodeSite) -> list[Member]:
    root = node.keystore_path
    names = node.io.files(root)
    if names is None:
        raise OpsError(f"{node.host}: its keystore {root} does not exist; an authority without"
                       " its session keys cannot be backed up (restore it first)")
    if len(names) > MAX_KEYSTORE_FILES:
        raise OpsError(f"{node.host}: {root} holds {len(names)} files, more than"
                       f" {MAX_KEYSTORE_FILES}; not a session keystore")
    members = []
    for name in names:
        if not KEYSTORE_NAME.match(name):
            continue  # not a key (an editor's backup, a lock file)
        members.append(Member(f"nodes/{node.host}/keystore/{check_component(name, 'key')}",
                              "keystore", node.host,
                              read_bounded(root / name, MAX_KEY_BYTES, f"{node.host}'s keystore",
                                           node.io)))
    if not members:
        raise OpsError(f"{node.host}: its keystore {root} holds no key; restore it before a"
                       " backup, or the backup would save an authority without its keys")
    return members


@contextlib.contextmanager
def private_tmp() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="net-backup-") as tmp:
        os.chmod(tmp, 0o700)
        yield Path(tmp)


def sqlite_copy(path: Path, io: HostIO = LOCAL) -> bytes:
    """A consistent copy of a live SQLite database (the backup API copies under SQLite's own
    locking, so a write in progress is either in the copy or not, never half of it), made on
    the database's host."""
    data = io.sqlite_copy(path, MAX_DATABASE_BYTES)
    if data is None:
        raise OpsError(f"the database {path} does not exist on {io.where}; start the service"
                       " once, or leave its host out (--host)")
    return data


def pg_env(url: str) -> dict[str, str]:
    """libpq's environment for ``url``: the password never on a command line."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    for key, value in (("PGHOST", parsed.host), ("PGPORT", parsed.port),
                       ("PGUSER", parsed.username), ("PGPASSWORD", parsed.password),
                       ("PGDATABASE", parsed.database)):
        if value is not None:
            env[key] = str(value)
    return env


def pg_dump(url: str) -> bytes:
    """``pg_dump --format=custom``: a snapshot in one transaction while the service runs."""
    with private_tmp() as tmp:
        out = tmp / "dump"
        proc = subprocess.run(["pg_dump", "--format=custom", "--no-owner", "--file", str(out)],
                              env=pg_env(url), capture_output=True, text=True,
                              timeout=DUMP_TIMEOUT_S, check=False)
        if proc.returncode != 0:
            raise OpsError(f"pg_dump failed: {proc.stderr.strip()[-500:]}")
        return read_bounded(out, MAX_DATABASE_BYTES, "pg_dump's output")


def database(site: ServiceSite) -> Member:
    if site.engine == "postgresql":
        if site.io is not LOCAL:
            raise OpsError(f"{site.host}: its {site.service} keeps its database in PostgreSQL"
                           " on a remote machine; ops-tools backup dumps PostgreSQL from this"
                           " machine only (docs/backup.md, \"Not yet\"): leave the host out"
                           " (--host) and pg_dump it there")
        data, suffix = pg_dump(site.database_url), "pgdump"
    else:
        data, suffix = sqlite_copy(site.sqlite_path, site.io), "sqlite"
    return Member(f"services/{site.host}/{site.service}.{suffix}", "database", site.host, data,
                  {"service": site.service, "engine": site.engine})


def release(nodes: list[NodeSite]) -> list[Member]:
    """The spec and binary the network runs (an authority's, else any node's), with sums."""
    node = sorted(nodes, key=lambda n: (n.role != "authority", n.host))[0]
    binary = node.manifest.get("binary") or {}
    spec = read_bounded(node.chainspec_path, MAX_RELEASE_FILE_BYTES, "the chain spec", node.io)
    exe = read_bounded(node.binary_path, MAX_RELEASE_FILE_BYTES, "the node binary", node.io)
    if binary.get("sha256") and sha256(exe) != binary["sha256"]:
        raise OpsError(f"{node.host}: the binary {node.binary_path} has sha256 {sha256(exe)}, its"
                       f" manifest records {binary['sha256']}; re-converge before a backup")
    info = {"genesis_hash": node.manifest.get("genesis_hash"),
            "chain_id": node.manifest.get("chain_id"),
            "raw_spec_sha256": sha256(spec), "binary_sha256": sha256(exe),
            "binary_name": node.binary_path.name, "binary_version": binary.get("version"),
            "runtime": node.manifest.get("runtime"),
            "pallet_suite_revision": node.manifest.get("pallet_suite_revision"),
            "from_host": node.host}
    return [
        Member("release/chainspec.json", "release", None, spec, {"file": "chainspec"}),
        Member("release/node", "release", None, exe, {"file": "binary"}),
        Member("release/release.json", "release", None,
               (json.dumps(info, indent=2, sort_keys=True) + "\n").encode(), {"file": "info"}),
    ]


def collect(dep: Deployment, hosts: list[str] | None = None) -> list[Member]:
    """Every member of a backup of ``dep`` (limited to ``hosts`` when given; the release is
    always saved)."""
    members: list[Member] = []
    for node in dep.nodes:
        if hosts and node.host not in hosts:
            continue
        members.append(node_key(node))
        if node.role == "authority":
            members += keystore(node)
    for site in dep.services:
        members.append(database(site))
    return members + release(dep.nodes)

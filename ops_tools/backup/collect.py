"""Reading what a backup saves into members: key files, keystores, a consistent online copy of
each service database (SQLite's backup API, ``pg_dump``), the release the nodes run."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

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


def read_bounded(path: Path, limit: int, what: str) -> bytes:
    try:
        with path.open("rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise OpsError(f"{what}: cannot read {path} ({exc.strerror})") from None
    if len(data) > limit:
        raise OpsError(f"{what}: {path} is larger than {limit} bytes; not what a backup saves")
    return data


def node_key(node: NodeSite) -> Member:
    path = node.node_key_path
    return Member(f"nodes/{node.host}/node_key", "node_key", node.host,
                  read_bounded(path, MAX_KEY_BYTES, f"{node.host}'s node key"),
                  {"peer_id": node.manifest.get("peer_id")})


def keystore(node: NodeSite) -> list[Member]:
    root = node.keystore_path
    if not root.is_dir():
        raise OpsError(f"{node.host}: its keystore {root} does not exist; an authority without"
                       " its session keys cannot be backed up (restore it first)")
    files = sorted(p for p in root.iterdir() if p.is_file() and not p.is_symlink())
    if len(files) > MAX_KEYSTORE_FILES:
        raise OpsError(f"{node.host}: {root} holds {len(files)} files, more than"
                       f" {MAX_KEYSTORE_FILES}; not a session keystore")
    members = []
    for path in files:
        if not KEYSTORE_NAME.match(path.name):
            continue  # not a key (an editor's backup, a lock file)
        members.append(Member(f"nodes/{node.host}/keystore/{check_component(path.name, 'key')}",
                              "keystore", node.host,
                              read_bounded(path, MAX_KEY_BYTES, f"{node.host}'s keystore")))
    if not members:
        raise OpsError(f"{node.host}: its keystore {root} holds no key; restore it before a"
                       " backup, or the backup would save an authority without its keys")
    return members


@contextlib.contextmanager
def private_tmp() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="net-backup-") as tmp:
        os.chmod(tmp, 0o700)
        yield Path(tmp)


def sqlite_copy(path: Path) -> bytes:
    """A consistent copy of a live SQLite database (the backup API copies under SQLite's own
    locking, so a write in progress is either in the copy or not, never half of it)."""
    if not path.is_file():
        raise OpsError(f"the database {path} does not exist; start the service once, or leave"
                       " its host out (--host)")
    with private_tmp() as tmp:
        copy = tmp / "copy.db"
        # mode=rw: never create an empty database where the service's is missing
        source = sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True, timeout=30)
        try:
            target = sqlite3.connect(copy)
            try:
                source.backup(target)
            finally:
                target.close()
        finally:
            source.close()
        return read_bounded(copy, MAX_DATABASE_BYTES, f"the copy of {path}")


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
        data, suffix = pg_dump(site.database_url), "pgdump"
    else:
        data, suffix = sqlite_copy(site.sqlite_path), "sqlite"
    return Member(f"services/{site.host}/{site.service}.{suffix}", "database", site.host, data,
                  {"service": site.service, "engine": site.engine})


def release(nodes: list[NodeSite]) -> list[Member]:
    """The spec and binary the network runs (an authority's, else any node's), with sums."""
    node = sorted(nodes, key=lambda n: (n.role != "authority", n.host))[0]
    binary = node.manifest.get("binary") or {}
    spec = read_bounded(node.chainspec_path, MAX_RELEASE_FILE_BYTES, "the chain spec")
    exe = read_bounded(node.binary_path, MAX_RELEASE_FILE_BYTES, "the node binary")
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

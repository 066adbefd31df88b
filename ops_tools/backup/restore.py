"""``ops-tools restore``: check the backup in full, check it belongs to the network the
inventory points at, say what will be replaced, then stop what uses those files, write them and
start it again.

Targets come from the current deployment (``locate``), never from a name in the archive. The
release is written only where a node's binary or spec is missing: a different one in place may
be a newer build of the same genesis, which a restore must not downgrade.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ops_tools.backup import collect, control, store
from ops_tools.backup.hostio import LOCAL, HostIO
from ops_tools.backup.locate import Deployment, locate
from ops_tools.backup.manifest import KINDS, ManifestError, sha256
from ops_tools.backup.take import passphrase_from
from ops_tools.deploy.inventory import load_inventory
from ops_tools.errors import InputError, OpsError
from ops_tools.programs import Program

CREATE, REPLACE, SAME, KEPT = "create", "replace", "same", "kept (differs)"
RESTORE_TIMEOUT_S = 600


@dataclass(frozen=True)
class Write:
    member: str
    kind: str
    host: str | None
    target: str  # a path, or the database a dump goes into (without its password)
    change: str
    engine: str | None = None
    database_url: str | None = field(default=None, repr=False)
    mode: int = 0o600
    io: HostIO = field(default=LOCAL, compare=False, repr=False)

    @property
    def writes(self) -> bool:
        return self.change in (CREATE, REPLACE)

    def to_json(self) -> dict[str, Any]:
        return {"member": self.member, "kind": self.kind, "host": self.host,
                "target": self.target, "change": self.change}


@dataclass(frozen=True)
class Plan:
    source: Path
    network: dict[str, str]
    writes: list[Write]
    programs: dict[str, Program]  # host -> what is stopped before and started after
    ios: dict[str, HostIO] = field(default_factory=dict, repr=False)  # host -> how it is reached

    def describe(self) -> list[str]:
        lines = [f"restore from {self.source} (genesis {self.network['genesis_hash']},"
                 f" chain {self.network.get('chain_id')}):"]
        lines += [f"  {w.change:<15} {w.target}  ({w.kind}{', ' + w.host if w.host else ''})"
                  for w in self.writes]
        if self.programs:
            lines.append(f"  stops and starts again: {', '.join(sorted(self.programs))}")
        return lines


def _change(target: Path, data: bytes, io: HostIO = LOCAL) -> str:
    try:
        found = io.sha256(target)
    except OSError:
        return REPLACE
    if found is None:
        return CREATE
    return SAME if found == sha256(data) else REPLACE


def _redacted(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def check_network(verified: store.Verified, dep: Deployment) -> None:
    here = dep.network()
    there = verified.network
    if here["genesis_hash"] != there["genesis_hash"] or \
            str(here.get("chain_id")) != str(there.get("chain_id")):
        raise InputError(
            f"--from {verified.path}: the backup is of chain {there.get('chain_id')} genesis"
            f" {there['genesis_hash']}, but inventory {dep.inventory.path} runs chain"
            f" {here.get('chain_id')} genesis {here['genesis_hash']}; refusing to write"
            " anything. Point --inventory at the network the backup came from"
        )


def plan(verified: store.Verified, dep: Deployment, hosts: list[str] | None = None,
         kinds: list[str] | None = None) -> Plan:
    check_network(verified, dep)
    bad = sorted(set(kinds or []) - set(KINDS))
    if bad:
        raise InputError(f"--kind {', '.join(bad)}: not one of {', '.join(KINDS)}")
    writes: list[Write] = []
    programs: dict[str, Program] = {}
    ios: dict[str, HostIO] = {}
    for entry in verified.members:
        kind, host, name = entry["kind"], entry["host"], entry["name"]
        if kinds and kind not in kinds:
            continue
        if hosts and host not in hosts and kind != "release":
            continue
        data = verified.files[name]
        if kind == "release":
            writes += _release_writes(entry, data, dep, hosts)
            continue
        if kind in ("node_key", "keystore"):
            node = dep.node(host)
            if node is None:
                raise InputError(f"{host}: not deployed (no deployed.json); deploy it with"
                                 " playbooks/site.yml, then restore its keys")
            if kind == "node_key":
                target = node.node_key_path
            else:
                file = name.rsplit("/", 1)[1]
                if not collect.KEYSTORE_NAME.match(file):
                    raise ManifestError(f"member {name!r}: {file!r} is not a keystore file name")
                target = node.keystore_path / file
            writes.append(Write(name, kind, host, str(target),
                                _change(target, data, node.io), io=node.io))
            programs[host], ios[host] = node.program, node.io
        elif kind == "database":
            site = dep.service(host)
            meta = entry.get("meta") or {}
            if site is None:
                raise InputError(f"{host}: its {meta.get('service')} is not deployed; deploy"
                                 " it with playbooks/site.yml, then restore its database")
            if site.service != meta.get("service") or site.engine != meta.get("engine"):
                raise InputError(f"{host}: the backup holds a {meta.get('engine')} database of"
                                 f" {meta.get('service')}, the host runs {site.service} on"
                                 f" {site.engine}; restore it by hand")
            if site.engine == "sqlite":
                path = site.sqlite_path
                writes.append(Write(name, kind, host, str(path),
                                    REPLACE if site.io.exists(path) else CREATE, "sqlite",
                                    io=site.io))
            else:
                if site.io is not LOCAL:
                    raise InputError(f"{host}: its {site.service} keeps its database in"
                                     " PostgreSQL on a remote machine; restore it there with"
                                     " pg_restore (docs/backup.md, \"Not yet\")")
                writes.append(Write(name, kind, host, _redacted(site.database_url), REPLACE,
                                    "postgresql", site.database_url))
            programs[host], ios[host] = site.program, site.io
    restarted = {h: p for h, p in programs.items()
                 if any(w.host == h and w.writes for w in writes)}
    return Plan(verified.path, verified.network, writes, restarted,
                {h: ios[h] for h in restarted})


def _release_writes(entry: dict[str, Any], data: bytes, dep: Deployment,
                    hosts: list[str] | None) -> list[Write]:
    which = (entry.get("meta") or {}).get("file")
    if which not in ("binary", "chainspec"):
        return []
    out = []
    for node in dep.nodes:
        if hosts and node.host not in hosts:
            continue
        target = node.binary_path if which == "binary" else node.chainspec_path
        change = _change(target, data, node.io)
        out.append(Write(entry["name"], "release", node.host, str(target),
                         KEPT if change == REPLACE else change,
                         mode=0o755 if which == "binary" else 0o644, io=node.io))
    return out


def _write(w: Write, data: bytes) -> None:
    if w.engine == "postgresql":
        _pg_restore(w, data)
        return
    target = Path(w.target)
    # a keystore deleted with its directory comes back 0700, as the node makes it
    w.io.write(target, data, w.mode, 0o700 if w.kind == "keystore" else 0o755)
    if w.engine == "sqlite":
        # a journal of the replaced database would be applied to the restored one
        for suffix in ("-wal", "-shm", "-journal"):
            w.io.remove(Path(f"{target}{suffix}"))


def _pg_restore(w: Write, data: bytes) -> None:
    assert w.database_url is not None
    with collect.private_tmp() as tmp:
        dump = tmp / "dump"
        dump.write_bytes(data)
        proc = subprocess.run(
            ["pg_restore", "--clean", "--if-exists", "--no-owner", "--single-transaction",
             "--dbname", collect.pg_env(w.database_url).get("PGDATABASE", ""), str(dump)],
            env=collect.pg_env(w.database_url), capture_output=True, text=True,
            timeout=RESTORE_TIMEOUT_S, check=False)
    if proc.returncode != 0:
        raise OpsError(f"pg_restore into {w.target} failed: {proc.stderr.strip()[-500:]}")


@dataclass(frozen=True)
class RestoreResult:
    plan: Plan
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"from": str(self.plan.source), "network": self.plan.network,
                "writes": [w.to_json() for w in self.plan.writes],
                "restarted": sorted(self.plan.programs), "seconds": round(self.seconds, 3)}


def apply(p: Plan, verified: store.Verified,
          on_step: Callable[[str], None] = lambda _: None) -> None:
    """Stop, write, start. What was stopped is started again even when a write fails."""
    try:
        for host, program in p.programs.items():
            on_step(f"stopping {host} ({program.name})")
            control.stop(program, p.ios.get(host, LOCAL))
        for w in p.writes:
            if w.writes:
                on_step(f"{w.change} {w.target}")
                _write(w, verified.files[w.member])
    finally:
        for host, program in p.programs.items():
            on_step(f"starting {host} ({program.name})")
            control.start(program, p.ios.get(host, LOCAL))


def restore(inventory: Path, source: Path, passphrase_file: Path,
            hosts: list[str] | None = None, kinds: list[str] | None = None,
            confirm: Callable[[Plan], bool] = lambda _: True,
            on_step: Callable[[str], None] = lambda _: None) -> RestoreResult:
    """Verify the backup, plan, ask ``confirm`` with the plan, then apply it."""
    started = time.monotonic()
    passphrase = passphrase_from(passphrase_file)
    on_step(f"verifying {source} (sums, authentication tag, names)")
    verified = store.read(source, passphrase)
    with locate(load_inventory(inventory), hosts) as dep:
        p = plan(verified, dep, hosts, kinds)
        if not confirm(p):
            raise OpsError("restore not confirmed; nothing was written")
        apply(p, verified, on_step)
    return RestoreResult(p, time.monotonic() - started)

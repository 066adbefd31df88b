"""``ops-tools backup``: locate, collect, seal, write."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ops_tools.backup import collect, crypto, store
from ops_tools.backup import manifest as mf
from ops_tools.backup.locate import locate
from ops_tools.deploy.inventory import load_inventory
from ops_tools.errors import InputError
from ops_tools.secrets import read_secret


def passphrase_from(path: Path) -> bytes:
    """The passphrase file's content (0600 checked; never logged, never on a command line)."""
    return crypto.check_passphrase(read_secret(path, key="--passphrase-file"), str(path))


@dataclass(frozen=True)
class BackupResult:
    path: Path
    network: dict[str, str]
    members: list[dict[str, Any]]
    archive_sha256: str
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "network": self.network,
                "archive_sha256": self.archive_sha256, "seconds": round(self.seconds, 3),
                "members": [{k: m[k] for k in ("name", "kind", "host", "size", "sha256")}
                            for m in self.members]}


def backup(inventory: Path, out: Path, passphrase_file: Path, hosts: list[str] | None = None,
           on_step: Callable[[str], None] = lambda _: None) -> BackupResult:
    started = time.monotonic()
    passphrase = passphrase_from(passphrase_file)
    if out.exists() or out.is_symlink():
        raise InputError(f"--out {out}: already exists; a backup never overwrites another."
                         " Name a new directory")
    inv = load_inventory(inventory)
    with locate(inv, hosts) as dep:
        network = dep.network()
        missing = [h for h in dep.undeployed if not hosts or h in hosts]
        if missing:
            raise InputError(f"inventory {inventory}: {', '.join(missing)} not deployed (no"
                             " deployed.json); deploy them, or leave them out with --host")
        on_step(f"saving keys, databases and the release of genesis"
                f" {network['genesis_hash'][:18]}…")
        members = collect.collect(dep, hosts)
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    manifest = mf.build(members, network, str(inventory), created)
    on_step(f"sealing {len(members)} members into {out}")
    store.write(out, manifest, {m.name: m.data for m in members}, passphrase)
    sealed = store.read_manifest_only(out)
    return BackupResult(out, network, manifest["members"], sealed["archive"]["sha256"],
                        time.monotonic() - started)

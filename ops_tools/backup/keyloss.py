"""The key-loss drill: an authority loses its keystore and node key, and the backup brings it
back as the same node (same peer id, same session keys) with finality resuming.

Steps: the network must be healthy (finality advancing); take a backup; stop the authority;
delete its keystore and node key; restore both from the backup (restore starts the node);
wait for finality to advance past where it stood at the stop; compare the peer id
(``system_localPeerId``) and the keystore's session keys with those before. If anything fails
after the deletion, the keys are restored again and the node started before the error goes up:
a drill never leaves the authority without its keys.

``ops-tools drill key-loss`` (ops_tools/drills) runs this function; it is a library function so
that the drill runner journals it like its other scenarios: the runner names ``backup_dir``
(journal it before the call), and ``heal`` with the same arguments is what a resumed drill runs
to undo a run killed mid-fault.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ops_tools.backup import control, restore, take
from ops_tools.backup.locate import NodeSite, locate
from ops_tools.chain.rpc import RpcClient
from ops_tools.chain.status import wait_finality_advances, wait_for
from ops_tools.deploy.inventory import load_inventory
from ops_tools.errors import InputError, OpsError

HEALTH_TIMEOUT_S = 120.0
RECOVER_TIMEOUT_S = 300.0
# Finality must pass the height at the stop by this many blocks to count as resumed.
FINALITY_BLOCKS = 2


class DrillFailed(OpsError):
    pass


@dataclass(frozen=True)
class KeyLossReport:
    host: str
    backup: str
    peer_id_before: str
    peer_id_after: str
    session_keys_before: list[str]
    session_keys_after: list[str]
    finalized_at_stop: int
    finalized_after: int
    # From the stop of the authority to finality advancing again, and of that, the restore.
    time_to_recover_s: float
    restore_s: float

    @property
    def same_identity(self) -> bool:
        return self.peer_id_before == self.peer_id_after and \
            self.session_keys_before == self.session_keys_after

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "same_identity": self.same_identity,
                "time_to_recover_s": round(self.time_to_recover_s, 3),
                "restore_s": round(self.restore_s, 3)}


def session_keys(node: NodeSite) -> list[str]:
    """The keystore's keys as Substrate names them: hex(key type) + hex(public key)."""
    return sorted(node.io.files(node.keystore_path) or [])


def _peer_id(node: NodeSite) -> str:
    return str(RpcClient(node.rpc_url, timeout=3).call("system_localPeerId"))


@contextlib.contextmanager
def _authority(inventory: Path, host: str) -> Iterator[tuple[NodeSite, str]]:
    """The authority and the public node's RPC URL (forwarded for a remote one), while open."""
    with locate(load_inventory(inventory)) as dep:
        node = dep.node(host)
        if node is None or node.role != "authority":
            raise InputError(f"--host {host}: not a deployed authority of inventory {inventory}")
        public = next((n for n in dep.nodes if n.role == "rpc"), None)
        yield node, (public or node).rpc_url


def heal(inventory: Path, backup_dir: Path, passphrase_file: Path, host: str = "authority-0",
         on_step: Callable[[str], None] = lambda _: None) -> bool:
    """Undo a drill that stopped mid-fault: restore the authority's keys from ``backup_dir`` if
    either is missing, and start it. Whether anything had to be restored."""
    with _authority(inventory, host) as (node, _):
        missing = not node.io.exists(node.node_key_path) or not session_keys(node)
        if missing:
            if not (backup_dir / "manifest.json").is_file():
                raise DrillFailed(f"{host} lacks its keys and {backup_dir} holds no backup;"
                                  " restore them from the latest backup: ops-tools restore"
                                  f" --host {host} --kind node_key --kind keystore"
                                  " (docs/backup.md)")
            restore.restore(inventory, backup_dir, passphrase_file, hosts=[host],
                            kinds=["node_key", "keystore"], on_step=on_step)
        control.start(node.program, node.io)
    return missing


def key_loss(inventory: Path, backup_dir: Path, passphrase_file: Path,
             host: str = "authority-0", on_step: Callable[[str], None] = lambda _: None,
             timeout_s: float = RECOVER_TIMEOUT_S) -> KeyLossReport:
    """Run the drill; ``backup_dir`` is a new directory for its backup."""
    with _authority(inventory, host) as (node, public):
        return _key_loss(inventory, backup_dir, passphrase_file, host, node, public, on_step,
                         timeout_s)


def _key_loss(inventory: Path, backup_dir: Path, passphrase_file: Path, host: str,
              node: NodeSite, public: str, on_step: Callable[[str], None],
              timeout_s: float) -> KeyLossReport:
    on_step("checking that finality advances (a drill never starts on a sick network)")
    wait_finality_advances(public, HEALTH_TIMEOUT_S)
    peer_before, keys_before = _peer_id(node), session_keys(node)
    if not keys_before:
        raise DrillFailed(f"{host}: its keystore {node.keystore_path} is empty before the drill")
    on_step(f"taking a backup into {backup_dir}")
    take.backup(inventory, backup_dir, passphrase_file, on_step=on_step)

    def restore_keys() -> float:
        started = time.monotonic()
        restore.restore(inventory, backup_dir, passphrase_file, hosts=[host],
                        kinds=["node_key", "keystore"], on_step=on_step)
        return time.monotonic() - started

    on_step(f"stopping {host}")
    stopped = time.monotonic()
    control.stop(node.program, node.io)
    try:
        on_step(f"deleting {node.keystore_path} and {node.node_key_path}")
        node.io.remove(node.keystore_path)
        node.io.remove(node.node_key_path)
        # Read with the authority down for a while: a justification still in flight at the
        # stop has landed, and GRANDPA (two authorities, both votes needed) finalizes nothing
        # more until it signs again.
        finalized_at_stop = RpcClient(public, timeout=3).finalized_number()
        on_step(f"restoring {host}'s keys from the backup")
        restore_s = restore_keys()
        on_step("waiting for finality to advance past the stop")
        _, finalized_after = wait_finality_advances(public, timeout_s, blocks=FINALITY_BLOCKS,
                                                    since=finalized_at_stop)
        recovered = time.monotonic() - stopped
        peer_after = wait_for(f"{host} to answer system_localPeerId",
                              lambda: (True, _peer_id(node)), timeout_s)
    except BaseException:
        # never leave the authority without its keys: put them back and start it
        with contextlib.suppress(Exception):
            heal(inventory, backup_dir, passphrase_file, host)
        raise
    report = KeyLossReport(host, str(backup_dir), peer_before, peer_after, keys_before,
                           session_keys(node), finalized_at_stop, finalized_after, recovered,
                           restore_s)
    if not report.same_identity:
        raise DrillFailed(f"{host} came back as another node: peer id {peer_before} ->"
                          f" {peer_after}, session keys {keys_before} ->"
                          f" {report.session_keys_after}")
    return report

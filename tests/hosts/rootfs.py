"""The Debian 12 root file system that every test host boots from: built once with debootstrap,
cached outside the clone under a directory named by the hash of its recipe, so a changed recipe
builds a new one and an unchanged one is reused by every clone and every run."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

CACHE_ROOT = Path(os.environ.get("NET_TESTHOSTS_CACHE", "/var/cache/net-testhosts"))
# An older recipe's tree is kept this long after it was built (see ensure_rootfs).
KEEP_OLD_S = 2 * 86400
MIRROR = os.environ.get("NET_TESTHOSTS_MIRROR", "http://deb.debian.org/debian")

# The sudo user Ansible connects as; the testnet inventory's ansible_user.
SUDO_USER = "deploy"

# Runs chrooted in the fresh tree. Per-host identity (machine id, SSH host keys, host name) is
# removed here and made at boot time by hosts.py, so no two hosts share one.
_CUSTOMISE = f"""
set -eu
export LANG=C.UTF-8
echo 'LANG=C.UTF-8' > /etc/default/locale
useradd --create-home --shell /bin/bash --groups sudo {SUDO_USER}
echo '{SUDO_USER} ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/{SUDO_USER}
chmod 0440 /etc/sudoers.d/{SUDO_USER}
install -d -m 0700 -o {SUDO_USER} -g {SUDO_USER} /home/{SUDO_USER}/.ssh
install -d -m 0700 /root/.ssh
# Units that have no business in a container: the clock belongs to this machine, and timers that
# would run apt or fstrim in the middle of a test.
for u in systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer fstrim.timer \\
         e2scrub_all.timer e2scrub_reap.service getty@tty1.service; do
  ln -sf /dev/null /etc/systemd/system/$u
done
# Debian enables the servers it installs. Only the hosts that get roles/monitoring need the
# Prometheus daemons, and only an indexer's host PostgreSQL; those roles start what they use.
# Elsewhere they would only take the processor from the tests (five daemons on every host of
# every fleet).
rm -f /etc/systemd/system/multi-user.target.wants/prometheus*.service \\
      /etc/systemd/system/multi-user.target.wants/postgresql.service
rm -f /etc/ssh/ssh_host_*
: > /etc/machine-id
rm -f /var/lib/dbus/machine-id
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
"""


@dataclass(frozen=True)
class Recipe:
    suite: str = "bookworm"
    variant: str = "minbase"
    packages: tuple[str, ...] = (
        "systemd",
        "systemd-sysv",
        "dbus",
        "openssh-server",
        "python3",
        "sudo",
        "iproute2",
        "ca-certificates",
        "procps",
        # The edge role's nginx (roles/edge): the hosts have no way to a Debian mirror; the
        # apt module (which needs python3-apt) finds it installed.
        "nginx",
        "python3-apt",
        # The indexer's PostgreSQL (roles/indexer with indexer_postgresql_manage), for the same
        # reason.
        "postgresql",
        # The monitoring (roles/monitoring), for the same reason.
        "prometheus",
        "prometheus-alertmanager",
        "prometheus-blackbox-exporter",
        "prometheus-node-exporter",
        # The partition drill's rules in the hosts' network namespaces (ops_tools/drills/
        # firewall.py): Debian's standard install has nftables (priority important), minbase not.
        "nftables",
    )
    customise: str = field(default=_CUSTOMISE)

    def key(self) -> str:
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


RECIPE = Recipe()


def _stale(tree: Path) -> bool:
    """Built more than KEEP_OLD_S ago (its recipe file is written last)."""
    try:
        return time.time() - (tree / ".recipe.json").stat().st_mtime > KEEP_OLD_S
    except FileNotFoundError:
        return True


def rootfs_path(recipe: Recipe = RECIPE) -> Path:
    return CACHE_ROOT / f"rootfs-{recipe.key()}"


def ensure_rootfs(recipe: Recipe = RECIPE, log: Path | None = None) -> Path:
    """The cached tree for this recipe, built first when missing. Concurrent callers wait on one
    lock; the tree appears under its final name only when complete (rename of a staging dir)."""
    final = rootfs_path(recipe)
    if (final / "etc" / "os-release").exists():
        return final
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    with open(CACHE_ROOT / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / "etc" / "os-release").exists():
            return final
        staging = CACHE_ROOT / f".staging-{recipe.key()}"
        shutil.rmtree(staging, ignore_errors=True)
        out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115
        try:
            subprocess.run(
                [
                    "debootstrap",
                    f"--variant={recipe.variant}",
                    f"--include={','.join(recipe.packages)}",
                    recipe.suite,
                    str(staging),
                    MIRROR,
                ],
                check=True,
                stdout=out,
                stderr=out,
            )
            subprocess.run(
                ["chroot", str(staging), "/bin/sh", "-c", recipe.customise],
                check=True,
                stdout=out,
                stderr=out,
                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"},
            )
        except subprocess.CalledProcessError as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise RuntimeError(
                f"building the test-host root file system failed ({exc.cmd[0]} exit"
                f" {exc.returncode}); see {log or 'its output'}"
            ) from exc
        finally:
            if log:
                out.close()  # type: ignore[union-attr]
        (staging / ".recipe.json").write_text(json.dumps(asdict(recipe), indent=1))
        staging.rename(final)
        # Older recipes' trees, unless a host (of another clone) still boots from one, or the
        # tree is recent: clones on two recipes (branches of one machine) would otherwise delete
        # each other's tree on every build, one of them maybe between another's check and mount.
        mounts = Path("/proc/mounts").read_text()
        for old in CACHE_ROOT.glob("rootfs-*"):
            if old != final and f"lowerdir={old}" not in mounts and _stale(old):
                shutil.rmtree(old, ignore_errors=True)
    return final

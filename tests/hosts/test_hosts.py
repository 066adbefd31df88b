"""The systemd test hosts themselves: real systemd as PID 1 in each, reachable over SSH with host
keys checked, a sudo user, an identity of its own, an address of its own on which neighbours
reach it; and stopping leaves nothing behind."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from tests.hosts.hosts import CGROUP_GROUP, CGROUP_ROOTS, boot_fleet, missing_tools, stop_fleet
from tests.hosts.rootfs import RECIPE, rootfs_path

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)


def test_recipe_change_changes_cache_key() -> None:
    changed = replace(RECIPE, packages=(*RECIPE.packages, "curl"))
    assert changed.key() != RECIPE.key()
    assert rootfs_path(changed) != rootfs_path(RECIPE)
    assert replace(RECIPE).key() == RECIPE.key()


def test_two_hosts_have_their_own_identity(testhosts) -> None:
    fleet = testhosts("alpha", "beta")
    facts = {}
    for h in fleet.hosts:
        proc = h.ssh("hostname; cat /etc/machine-id; systemctl is-system-running;"
                     " ps -o comm= -p 1; sudo -n id -u;"
                     " cut -d' ' -f2 /etc/ssh/ssh_host_ed25519_key.pub")
        assert proc.returncode == 0, proc.stderr
        facts[h.name] = proc.stdout.split()
    for name, (hostname, machine_id, state, pid1, sudo_uid, _key) in facts.items():
        assert hostname == name
        assert len(machine_id) == 32
        assert state == "running"
        assert pid1 == "systemd"
        assert sudo_uid == "0"
    assert facts["alpha"][1] != facts["beta"][1], "machine ids must differ"
    assert facts["alpha"][5] != facts["beta"][5], "SSH host keys must differ"


def test_hosts_reach_each_other_on_the_same_port(testhosts) -> None:
    fleet = testhosts("alpha", "beta")
    alpha, beta = fleet.hosts
    assert alpha.address != beta.address and alpha.ssh_port == beta.ssh_port == 22
    probe = ("python3 -c 'import socket,sys; s=socket.create_connection((sys.argv[1], 22), 5);"
             " print(s.recv(7).decode())' ")
    proc = alpha.ssh(probe + "beta")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "SSH-2.0"


def test_unknown_host_key_is_refused(testhosts, tmp_path: Path) -> None:
    alpha = testhosts("alpha", "beta").hosts[0]
    other = tmp_path / "known_hosts"
    other.write_text(f"{alpha.address} ssh-ed25519 "
                     "AAAAC3NzaC1lZDI1NTE5AAAAIDzJsQ3bN0wGq3Tr6bQkq8m3r2Jm7x4Xh7Ez6fJv0m3h\n")
    proc = replace(alpha, known_hosts=str(other)).ssh("true")
    assert proc.returncode != 0
    assert "HOST IDENTIFICATION HAS CHANGED" in proc.stderr or "verification failed" in proc.stderr


@pytest.mark.skipif(bool(missing_tools()), reason="systemd test hosts need root and "
                    "systemd-container, debootstrap (scripts/bootstrap)")
def test_stop_leaves_nothing_behind(tmp_path: Path) -> None:
    fleet = boot_fleet(["gamma"], tmp_path / "fleet")
    host = fleet.hosts[0]
    merged = Path(host.root) / "merged"
    try:
        assert os.path.ismount(merged)
        assert Path(f"/proc/{host.launcher_pid}").exists()
        assert Path(f"/run/netns/{host.netns}").exists()
    finally:
        stop_fleet(tmp_path / "fleet")
    assert not Path(f"/proc/{host.launcher_pid}").exists()
    assert not os.path.ismount(merged)
    assert not Path(host.root).exists()
    assert not Path(f"/run/netns/{host.netns}").exists()
    assert not Path(f"/sys/class/net/{host.veth}").exists()
    assert not Path(f"/sys/class/net/{fleet.bridge}").exists()
    for root in CGROUP_ROOTS:
        assert not (root / CGROUP_GROUP / host.cgroup).exists()
    assert str(tmp_path.resolve()) not in Path("/proc/mounts").read_text()

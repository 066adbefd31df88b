"""Real systemd test hosts: each one an overlay on the cached Debian 12 root file system, booted
with systemd-nspawn, with its own host name, machine id, SSH host keys and a sudo user, in its
own network namespace. The hosts of one fleet share a bridge on this machine, so each has its
own address and the same ports as its neighbours (as real servers do), they reach each other and
this machine, and nothing else.

A fleet's state (PIDs, mounts, namespaces) is recorded in <state_dir>/fleet.json, so whoever
booted it, `stop_fleet(state_dir)` stops it: by PID, then what is left in its cgroups, then the
mounts and the network devices. Needs root (mounts, namespaces, cgroups)."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from tests.hosts.rootfs import SUDO_USER, ensure_rootfs

RUN_ROOT = Path("/run/net-testhosts")
# One /24 per fleet, 10.77.<slot>.0/24: .1 is this machine's end (the bridge), hosts from .2.
SUBNET_PREFIX = "10.77"
SLOTS = range(1, 250)
CGROUP_ROOTS = (Path("/sys/fs/cgroup/systemd"), Path("/sys/fs/cgroup/unified"))
CGROUP_GROUP = "net-testhosts"
# systemd-nspawn's exit status when the container rebooted itself.
REBOOT_STATUS = 133
BOOT_TIMEOUT = 90.0


class TestHostError(RuntimeError):
    """A test host could not be booted or stopped; the message says which and why."""

    __test__ = False


@dataclass
class TestHost:
    __test__ = False

    name: str
    address: str
    user: str
    identity_file: str
    known_hosts: str
    launcher_pid: int
    root: str  # the host directory: upper/, work/, merged/, console.log
    netns: str
    veth: str
    cgroup: str
    ssh_port: int = 22

    def ssh_options(self) -> list[str]:
        """Strict host key checking against the keys made for this host at boot."""
        return [
            "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={self.known_hosts}",
            "-o", "IdentitiesOnly=yes",
            "-o", "ConnectTimeout=5",
            "-i", self.identity_file,
            "-p", str(self.ssh_port),
        ]  # fmt: skip

    def ssh(self, command: str, *, timeout: float = 60, user: str | None = None,
            ) -> subprocess.CompletedProcess[str]:
        argv = ["ssh", *self.ssh_options(), f"{user or self.user}@{self.address}", command]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)

    def put(self, local: Path, remote: str, mode: str = "0755") -> None:
        """Copy a file to the host over SSH (scp, then install as root)."""
        opts = ["-P" if o == "-p" else o for o in self.ssh_options()]
        tmp = f"/tmp/.put-{Path(remote).name}"
        proc = subprocess.run(["scp", "-q", *opts, str(local), f"{self.user}@{self.address}:{tmp}"],
                              capture_output=True, text=True, timeout=120, check=False)
        if proc.returncode != 0:
            raise TestHostError(f"scp to {self.name} failed: {proc.stderr.strip()}")
        install = shlex.join(["sudo", "install", "-D", "-m", mode, tmp, remote])
        proc = self.ssh(f"{install} && rm -f {shlex.quote(tmp)}")
        if proc.returncode != 0:
            raise TestHostError(f"install on {self.name} failed: {proc.stderr.strip()}")

    def unpack(self, tarball: Path) -> None:
        """Unpack ``tarball`` at / of this host, from this machine straight into its root file
        system (its overlay). Streaming the services' 100 MB virtualenv over SSH (Ansible's
        unarchive) took 105 s of a loaded machine's time where this takes a few seconds."""
        proc = subprocess.run(["tar", "-xzf", str(tarball), "-C", str(Path(self.root) / "merged")],
                              capture_output=True, text=True, timeout=300, check=False)
        if proc.returncode != 0:
            raise TestHostError(f"unpacking {tarball} on {self.name} failed: {proc.stderr.strip()}")

    def ansible_vars(self) -> dict[str, object]:
        """Inventory variables that reach this host the way the testnet inventory reaches its
        servers: SSH as the sudo user, become, host keys checked."""
        return {
            "ansible_host": self.address,
            "ansible_port": self.ssh_port,
            "ansible_user": self.user,
            "ansible_ssh_private_key_file": self.identity_file,
            "ansible_ssh_common_args": (
                f"-o UserKnownHostsFile={self.known_hosts} -o StrictHostKeyChecking=yes"
                " -o IdentitiesOnly=yes"
            ),
            "ansible_python_interpreter": "/usr/bin/python3",
        }


@dataclass
class Fleet:
    state_dir: str
    slot: int
    bridge: str
    rootfs: str
    hosts: list[TestHost]

    def by_name(self, name: str) -> TestHost:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def save(self) -> None:
        path = Path(self.state_dir) / "fleet.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        tmp.replace(path)

    @classmethod
    def load(cls, state_dir: Path) -> Fleet:
        data = json.loads((state_dir / "fleet.json").read_text())
        data["hosts"] = [TestHost(**h) for h in data["hosts"]]
        return cls(**data)


def _sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise TestHostError(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc


def _pid_alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reap it if it is ours
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _allocate_slot(state_dir: Path) -> int:
    """A subnet nobody else uses: mkdir is atomic, and a slot whose owner fleet is gone (its
    state directory deleted without a stop) is taken over after cleaning its devices."""
    slots = RUN_ROOT / "slots"
    slots.mkdir(parents=True, exist_ok=True)
    for n in SLOTS:
        d = slots / str(n)
        try:
            d.mkdir()
        except FileExistsError:
            owner = d / "owner"
            if owner.exists() and not (Path(owner.read_text()) / "fleet.json").exists():
                _sh("ip", "link", "del", f"ntb{n}", check=False)
                (owner).write_text(str(state_dir))
                return n
            continue
        (d / "owner").write_text(str(state_dir))
        return n
    raise TestHostError(f"no free test-host subnet left under {slots}; stop old fleets")


def _release_slot(slot: int) -> None:
    shutil.rmtree(RUN_ROOT / "slots" / str(slot), ignore_errors=True)


def _bridge_up(slot: int) -> str:
    bridge = f"ntb{slot}"
    _sh("ip", "link", "del", bridge, check=False)
    _sh("ip", "link", "add", bridge, "type", "bridge")
    _sh("ip", "addr", "add", f"{SUBNET_PREFIX}.{slot}.1/24", "dev", bridge)
    _sh("ip", "link", "set", bridge, "up")
    return bridge


def _write(path: Path, text: str, mode: int = 0o644, owner: tuple[int, int] | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    if owner:
        os.chown(path, *owner)


def _uid_gid(root: Path, user: str) -> tuple[int, int]:
    for line in (root / "etc" / "passwd").read_text().splitlines():
        f = line.split(":")
        if f[0] == user:
            return int(f[2]), int(f[3])
    raise TestHostError(f"user {user} missing from the root file system; rebuild it")


def _identity(merged: Path, name: str, address: str, all_hosts: dict[str, str],
              pubkey: str) -> str:
    """Per-host identity written into the overlay; returns the known_hosts line."""
    _write(merged / "etc" / "hostname", f"{name}\n")
    lines = ["127.0.0.1 localhost", f"127.0.1.1 {name}", "::1 localhost ip6-localhost"]
    lines += [f"{a} {n}" for n, a in all_hosts.items() if n != name]
    _write(merged / "etc" / "hosts", "\n".join(lines) + "\n")
    mid = _sh("systemd-id128", "new").stdout.strip()
    _write(merged / "etc" / "machine-id", mid + "\n", 0o444)
    _sh("ssh-keygen", "-A", "-f", str(merged))
    for key in (merged / "etc" / "ssh").glob("ssh_host_*_key"):
        key.chmod(0o600)
    uid_gid = _uid_gid(merged, SUDO_USER)
    _write(merged / "root" / ".ssh" / "authorized_keys", pubkey, 0o600)
    _write(merged / "home" / SUDO_USER / ".ssh" / "authorized_keys", pubkey, 0o600, uid_gid)
    host_key = (merged / "etc" / "ssh" / "ssh_host_ed25519_key.pub").read_text().split()
    return f"{address} {host_key[0]} {host_key[1]}\n"


def _netns(slot: int, index: int, bridge: str, address: str) -> tuple[str, str]:
    netns, veth = f"nt{slot}-{index}", f"nt{slot}h{index}"
    _sh("ip", "netns", "del", netns, check=False)
    _sh("ip", "netns", "add", netns)
    _sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns)
    _sh("ip", "link", "set", veth, "master", bridge, "up")
    _sh("ip", "-n", netns, "addr", "add", f"{address}/24", "dev", "eth0")
    _sh("ip", "-n", netns, "link", "set", "eth0", "up")
    _sh("ip", "-n", netns, "link", "set", "lo", "up")
    return netns, veth


def _cgroup_dirs(cgroup: str) -> list[Path]:
    return [r / CGROUP_GROUP / cgroup for r in CGROUP_ROOTS if r.is_dir()]


def _launch(host_root: Path, name: str, netns: str, cgroup: str) -> int:
    """systemd-nspawn in its own cgroup (else a second container collides with the first), in a
    loop that boots again on a reboot from inside, as systemd-nspawn@.service does."""
    dirs = _cgroup_dirs(cgroup)
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)

    def enter_cgroup() -> None:
        for d in dirs:
            (d / "cgroup.procs").write_text("0")

    nspawn = [
        "systemd-nspawn", "--boot", "--quiet",
        f"--directory={host_root / 'merged'}", f"--machine={name}",
        "--register=no", "--keep-unit", "--console=read-only",
        f"--network-namespace-path=/run/netns/{netns}",
        # Root of a host administers its own network namespace, as on a real server (the
        # partition drill's nftables rules): the namespace is the host's, made for it above,
        # so nothing of this machine's network is in reach.
        "--capability=CAP_NET_ADMIN",
    ]  # fmt: skip
    loop = f'while :; do "$@"; rc=$?; [ "$rc" -eq {REBOOT_STATUS} ] || exit "$rc"; done'
    log = open(host_root / "console.log", "ab")  # noqa: SIM115
    try:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", loop, "nspawn-loop", *nspawn],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True, preexec_fn=enter_cgroup,
        )  # fmt: skip
    finally:
        log.close()
    return proc.pid


def _wait_ready(host: TestHost, deadline: float) -> None:
    last = ""
    while time.monotonic() < deadline:
        if not _pid_alive(host.launcher_pid):
            console = Path(host.root, "console.log").read_text(errors="replace")[-2000:]
            raise TestHostError(f"test host {host.name}: systemd-nspawn exited:\n{console}")
        proc = host.ssh("systemctl is-system-running --wait", timeout=30)
        state = proc.stdout.strip()
        if state in ("running", "degraded"):
            if state == "degraded":
                failed = host.ssh("systemctl --failed --no-legend").stdout.strip()
                raise TestHostError(f"test host {host.name} booted degraded: {failed}")
            return
        last = (proc.stdout + proc.stderr).strip()
        time.sleep(0.3)
    raise TestHostError(f"test host {host.name} not reachable over SSH in time: {last}")


def boot_fleet(names: list[str], state_dir: Path, *, log: Path | None = None) -> Fleet:
    """Boot one host per name; on any failure, stop what was started and raise."""
    if os.geteuid() != 0:
        raise TestHostError("test hosts need root (overlay mounts, namespaces, cgroups)")
    state_dir = state_dir.resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    rootfs = ensure_rootfs(log=log or state_dir / "rootfs-build.log")
    key = state_dir / "id_ed25519"
    if not key.exists():
        _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "net-testhosts", "-f", str(key))
    pubkey = key.with_suffix(".pub").read_text()
    known_hosts = state_dir / "known_hosts"
    slot = _allocate_slot(state_dir)
    fleet = Fleet(str(state_dir), slot, f"ntb{slot}", str(rootfs), [])
    fleet.save()
    try:
        fleet.bridge = _bridge_up(slot)
        addresses = {n: f"{SUBNET_PREFIX}.{slot}.{i + 2}" for i, n in enumerate(names)}
        known = []
        for i, name in enumerate(names):
            host_root = state_dir / "hosts" / name
            for sub in ("upper", "work", "merged"):
                (host_root / sub).mkdir(parents=True, exist_ok=True)
            _sh("mount", "-t", "overlay", "overlay", "-o",
                f"lowerdir={rootfs},upperdir={host_root / 'upper'},workdir={host_root / 'work'}",
                str(host_root / "merged"))  # fmt: skip
            host = TestHost(
                name=name, address=addresses[name], user=SUDO_USER,
                identity_file=str(key), known_hosts=str(known_hosts), launcher_pid=0,
                root=str(host_root), netns="", veth="", cgroup=f"{slot}-{name}",
            )  # fmt: skip
            fleet.hosts.append(host)
            fleet.save()
            known.append(_identity(host_root / "merged", name, host.address, addresses, pubkey))
            host.netns, host.veth = _netns(slot, i, fleet.bridge, host.address)
            fleet.save()
            host.launcher_pid = _launch(host_root, name, host.netns, host.cgroup)
            fleet.save()
        known_hosts.write_text("".join(known))
        deadline = time.monotonic() + BOOT_TIMEOUT
        for host in fleet.hosts:
            _wait_ready(host, deadline)
    except BaseException:
        stop_fleet(state_dir)
        raise
    return fleet


def _cgroup_pids(d: Path) -> list[int]:
    pids: list[int] = []
    for procs in d.rglob("cgroup.procs"):
        with contextlib.suppress(OSError):
            pids += [int(p) for p in procs.read_text().split()]
    return pids


def _rmdir_tree(d: Path) -> None:
    if not d.is_dir():
        return
    for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        with contextlib.suppress(OSError):
            sub.rmdir()
    with contextlib.suppress(OSError):
        d.rmdir()


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


def _stop_host(host: TestHost, timeout: float = 20) -> None:
    pid = host.launcher_pid
    if pid and _pid_alive(pid):
        # The loop exits when systemd-nspawn does (a clean shutdown is status 0, not a reboot).
        for child in _children(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    # What is left in the host's cgroups was started by it: kill it by PID.
    for d in _cgroup_dirs(host.cgroup):
        for _ in range(50):
            pids = _cgroup_pids(d)
            if not pids:
                break
            for p in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p, signal.SIGKILL)
            time.sleep(0.1)
        _rmdir_tree(d)
    merged = Path(host.root) / "merged"
    if os.path.ismount(merged):
        for _ in range(50):
            proc = _sh("umount", str(merged), check=False)
            if proc.returncode == 0 or not os.path.ismount(merged):
                break
            time.sleep(0.1)
        else:
            raise TestHostError(f"cannot unmount {merged}: {proc.stderr.strip()}")
    if host.netns:
        _sh("ip", "netns", "del", host.netns, check=False)
    if host.veth:
        _sh("ip", "link", "del", host.veth, check=False)
    shutil.rmtree(host.root, ignore_errors=True)


def stop_fleet(state_dir: Path) -> None:
    """Stop every host of the fleet recorded in state_dir and remove what it made."""
    state_dir = state_dir.resolve()
    if not (state_dir / "fleet.json").exists():
        return
    fleet = Fleet.load(state_dir)
    errors = []

    def stop(host: TestHost) -> None:
        try:
            _stop_host(host)
        except TestHostError as exc:
            errors.append(str(exc))

    # At once: each host's clean shutdown takes seconds, and they share nothing but the bridge
    # (deleted after them).
    with ThreadPoolExecutor(max_workers=max(1, len(fleet.hosts))) as pool:
        list(pool.map(stop, fleet.hosts))
    _sh("ip", "link", "del", fleet.bridge, check=False)
    for r in CGROUP_ROOTS:
        with contextlib.suppress(OSError):
            (r / CGROUP_GROUP).rmdir()  # only when no other fleet uses it
    if errors:
        raise TestHostError("; ".join(errors))
    (state_dir / "fleet.json").unlink()
    _release_slot(fleet.slot)
    shutil.rmtree(state_dir / "hosts", ignore_errors=True)


def missing_tools() -> list[str]:
    """What this machine lacks for test hosts (scripts/bootstrap installs the packages)."""
    missing = [t for t in ("debootstrap", "systemd-nspawn", "ip", "ssh", "ssh-keygen",
                           "systemd-id128") if shutil.which(t) is None]
    if os.geteuid() != 0:
        missing.append("root")
    return missing


__all__ = ["Fleet", "TestHost", "TestHostError", "boot_fleet", "missing_tools", "stop_fleet"]

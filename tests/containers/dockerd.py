"""A Docker daemon of the test's own: its data root, exec root and socket under a temporary
directory, no bridge and no iptables (containers use the host's network), stopped by its PID."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker


@contextlib.contextmanager
def dockerd(timeout: float = 120) -> Iterator[Any]:
    if shutil.which("dockerd") is None:
        raise AssertionError("dockerd is not installed (scripts/bootstrap --test installs"
                             " docker.io)")
    # A short root: the daemon's sockets (its own and containerd's) must stay under 108 bytes.
    root = Path(tempfile.mkdtemp(prefix="netdk-", dir="/var/tmp"))
    sock = root / "docker.sock"
    log = open(root / "dockerd.log", "wb")  # noqa: SIM115 (closed in finally)
    proc = subprocess.Popen(
        ["dockerd", "--data-root", str(root / "data"), "--exec-root", str(root / "exec"),
         "-H", f"unix://{sock}", "--pidfile", str(root / "docker.pid"), "--bridge=none",
         "--iptables=false", "--ip6tables=false", "--storage-driver=overlay2"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    client = None
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"dockerd exited ({proc.returncode}):\n"
                                     f"{(root / 'dockerd.log').read_text()[-3000:]}")
            if sock.exists():
                with contextlib.suppress(docker.errors.DockerException):
                    client = docker.DockerClient(base_url=f"unix://{sock}", timeout=600)
                    client.ping()
                    break
            if time.monotonic() > deadline:
                raise AssertionError(f"dockerd did not answer within {timeout} s")
            time.sleep(0.5)
        client.base_url = f"unix://{sock}"  # type: ignore[attr-defined]
        client.log_path = root / "dockerd.log"  # type: ignore[attr-defined]
        yield client
    finally:
        if client is not None:
            with contextlib.suppress(docker.errors.DockerException):
                for container in client.containers.list(all=True):
                    container.remove(force=True)
            client.close()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()
        unmount_under(root)
        shutil.rmtree(root, ignore_errors=True)


def unmount_under(root: Path) -> None:
    """What dockerd leaves mounted under its roots when it stops (its network namespace's
    bind mount at exec/netns/default), deepest first: else the directory cannot be removed."""
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    for point in sorted((m for m in mounts if m.startswith(f"{root}/")), reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, timeout=60, check=False)

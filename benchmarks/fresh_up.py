"""Wall time of ``make up`` on a fresh machine: a Debian 12 container that has only what
debootstrap gives (minbase) and the project's prerequisites (python3 with venv, git, make), no
apt lists, no apt or pip cache. The project is cloned inside it from a repository mounted
read-only, then ``time make up`` runs; the phases are read off the output of scripts/bootstrap
and make, stamped as they arrive.

    python benchmarks/fresh_up.py [--repo /work/main] [--ref REF] [--bootstrap-only]

`make bootstrap` (apt packages, venv + pip) runs first, then `make up` (which then finds them
installed): only the local network waits for the lock. The total is the sum of the two.
--bootstrap-only stops after the first.

The container runs on a Docker daemon of its own (tests/containers/dockerd.py: own data root
and socket, no bridge, no iptables) on the host's network, since the package registries are
reached from there. The local network binds fixed loopback ports of that network: `make up`
holds /tmp/net-localnet.lock throughout, and the network is purged inside the container and the
container ended before the lock is let go.
The base image is built once with debootstrap and cached as a tarball named by its recipe
(ops_tools/containers/base.py) under $NET_FRESH_UP_CACHE (default /var/cache/net-fresh-up).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ops_tools.containers.base import Recipe, ensure_image  # noqa: E402
from tests.containers.dockerd import dockerd  # noqa: E402

LOCK = "/tmp/net-localnet.lock"  # noqa: S108 (the machine-wide lock of every session)
CACHE = Path(os.environ.get("NET_FRESH_UP_CACHE", "/var/cache/net-fresh-up"))
CLONE = "/root/net"

# The machine's CA bundle (its registries are reached through a TLS-inspecting egress) and its
# pip settings from the environment; its local wheel directories are not brought in: a fresh
# machine here downloads everything.
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
PIP_ENV = {"PIP_CERT": "/run/host-ca.crt", "PIP_DEFAULT_TIMEOUT": "180",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}

# Chrooted in the fresh tree. The project's machines are Debian 12 images set up as Docker's
# Debian images are: Debian's updates and security suites, a policy-rc.d that keeps packages'
# postinst from starting their services, dpkg without fsync (force-unsafe-io), apt without
# translations, gzipped indexes and no binary caches: the same here. No apt lists and no caches
# are left.
_PREPARE = """
set -eu
cat > /etc/apt/sources.list <<'EOF'
deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d
chmod 0755 /usr/sbin/policy-rc.d
echo force-unsafe-io > /etc/dpkg/dpkg.cfg.d/docker-apt-speedup
cat > /etc/apt/apt.conf.d/docker-settings <<'EOF'
Acquire::Languages "none";
Acquire::GzipIndexes "true";
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
"""

# What every machine of the project's kind has before the project touches it and scripts/
# bootstrap takes for granted: an interpreter with venv, git to clone, make to run make up.
RECIPE = Recipe(packages=("python3", "python3-venv", "git", "make", "ca-certificates"),
                trim=_PREPARE)

# Lines of scripts/bootstrap and make that open a phase.
PHASES = [
    ("apt packages", re.compile(r"^bootstrap: installing Debian packages")),
    ("venv + pip", re.compile(r"^bootstrap: creating \.venv")),
    ("venv + pip", re.compile(r"^bootstrap: installing Python dependencies")),
    ("localnet up", re.compile(r"^\.venv/bin/ops-tools localnet up")),
]


def run_stamped(client, container, script: str, log) -> tuple[int, list[tuple[float, str]]]:
    """Run ``script`` with bash in ``container``; each output line with the seconds since the
    start at which it arrived (echoed and written to ``log``)."""
    exec_id = client.api.exec_create(container.id, ["bash", "-c", f"exec 2>&1; {script}"])["Id"]
    start = time.monotonic()
    lines: list[tuple[float, str]] = []
    pending = b""
    for chunk in client.api.exec_start(exec_id, stream=True):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for raw in complete:
            stamp, text = time.monotonic() - start, raw.decode(errors="replace")
            lines.append((stamp, text))
            print(f"  {stamp:7.1f} s  {text}", flush=True)
            log.write(f"{stamp:9.2f} {text}\n")
    if pending:
        lines.append((time.monotonic() - start, pending.decode(errors="replace")))
    code = client.api.exec_inspect(exec_id)["ExitCode"]
    lines.append((time.monotonic() - start, ""))
    return code, lines


def phases(lines: list[tuple[float, str]]) -> list[tuple[str, float]]:
    """Seconds per phase: each phase runs from its first line to the next phase's first line;
    the total ends with the last line."""
    marks: list[tuple[str, float]] = [("make and bootstrap's checks", 0.0)]
    for stamp, text in lines:
        for name, pattern in PHASES:
            if pattern.search(text) and name not in (m[0] for m in marks):
                marks.append((name, stamp))
    end = lines[-1][0]
    return [(name, (marks[i + 1][1] if i + 1 < len(marks) else end) - at)
            for i, (name, at) in enumerate(marks)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=Path("/work/main"),
                        help="the repository to clone (mounted read-only)")
    parser.add_argument("--ref", default="HEAD", help="the commit or branch of it to run")
    parser.add_argument("--bootstrap-only", action="store_true",
                        help="make bootstrap alone (no network, no lock)")
    args = parser.parse_args()
    # A TERM (a deadline's timeout, say) unwinds like an error: the network is purged, the
    # container and the daemon stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    repo = args.repo.resolve()
    sha = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", f"{args.ref}^{{commit}}"],
        capture_output=True, text=True, check=True).stdout.strip()
    CACHE.mkdir(parents=True, exist_ok=True)
    log_path = CACHE / f"fresh-up-{sha[:12]}-{time.strftime('%Y%m%dT%H%M%S')}.log"
    print(f"commit {sha} of {repo}; log {log_path}")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    results: list[tuple[str, int, list[tuple[float, str]], float]] = []
    with open(log_path, "w") as log, dockerd() as client:
        t0 = time.monotonic()
        tag = ensure_image(client, RECIPE, cache=CACHE, log=CACHE / "base-build.log")
        print(f"base image {tag} ready in {time.monotonic() - t0:.1f} s (not counted)")
        container = client.containers.run(
            # init: a PID 1 that reaps, as a machine's does (supervisord, once its parent
            # localnet up has exited, is reparented to it; unreaped, it never looks gone).
            tag, ["sleep", "infinity"], detach=True, network_mode="host", init=True,
            shm_size="1g", environment=PIP_ENV,
            volumes={str(repo): {"bind": "/src", "mode": "ro"},
                     CA_BUNDLE: {"bind": PIP_ENV["PIP_CERT"], "mode": "ro"}})
        code, lines = run_stamped(
            client, container, f"git -c safe.directory='*' clone -q --no-checkout file:///src"
            f" {CLONE} && git -C {CLONE} checkout -q {sha}", log)
        if code != 0:
            print(f"clone failed ({code})")
            return 1
        print(f"clone: {lines[-1][0]:.1f} s (not counted)")
        # make up = bootstrap, then localnet up. The bootstrap runs first on its own, so that
        # only the local network waits for the machine-wide lock (held for minutes at a time by
        # others' tests); the make up after it finds everything installed and goes straight on.
        print(f"load average {os.getloadavg()[0]:.1f} before make bootstrap", flush=True)
        code, lines = run_stamped(client, container, f"cd {CLONE} && time make bootstrap", log)
        results.append(("make bootstrap", code, lines, os.getloadavg()[0]))
        if code == 0 and not args.bootstrap_only:
            t0 = time.monotonic()
            with open(LOCK, "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                print(f"holding {LOCK} (waited {time.monotonic() - t0:.1f} s); load average"
                      f" {os.getloadavg()[0]:.1f}", flush=True)
                try:
                    code, lines = run_stamped(client, container,
                                              f"cd {CLONE} && time make up", log)
                    results.append(("make up", code, lines, os.getloadavg()[0]))
                finally:
                    down = subprocess.run(
                        ["docker", "-H", client.base_url, "exec", container.id, "bash", "-c",
                         f"cd {CLONE} && if [ -x .venv/bin/ops-tools ]; then"
                         " .venv/bin/ops-tools localnet down --purge --yes; fi"],
                        capture_output=True, text=True, check=False)
                    log.write(f"localnet down --purge: exit {down.returncode}\n{down.stdout}"
                              f"{down.stderr}\n")
                    if down.returncode != 0:
                        print(f"localnet down --purge failed ({down.returncode}):"
                              f" {down.stderr.strip()[-500:]}")
                    # Every process of the network ends with the container, before the ports
                    # are handed back with the lock.
                    container.remove(force=True)
        else:
            container.remove(force=True)
    total = 0.0
    print()
    for name, code, lines, load in results:
        print(f"{name}: exit {code}, load average {load:.1f} at its end")
        for phase, seconds in phases(lines):
            print(f"  {phase:<28} {seconds:7.1f} s")
        total += lines[-1][0]
    print(f"total: {total:.1f} s")
    return 0 if all(code == 0 for _, code, _, _ in results) else 1

if __name__ == "__main__":
    sys.exit(main())

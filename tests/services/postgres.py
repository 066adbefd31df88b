"""A real PostgreSQL server for tests: Debian's binaries, a cluster in a temporary directory,
loopback and a free port only, stopped by its PID when the session ends.

initdb refuses to run as root; as root the cluster belongs to the ``postgres`` system user that
Debian's package creates, and the server runs as that user.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SUPERUSER = "net"


def pg_bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


@dataclass(frozen=True)
class PostgresServer:
    port: int
    datadir: Path

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(f"host=127.0.0.1 port={self.port} user={SUPERUSER} dbname=postgres",
                             autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


def _as_owner(owner: pwd.struct_passwd | None) -> dict:
    if owner is None:
        return {}
    return {"user": owner.pw_uid, "group": owner.pw_gid}


@contextmanager
def running_postgres(base: Path, port: int) -> Iterator[PostgresServer]:
    bindir = pg_bindir()
    if bindir is None:
        raise RuntimeError("PostgreSQL is not installed (scripts/bootstrap installs postgresql)")
    owner = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
    datadir = base / "pgdata"
    base.mkdir(parents=True, exist_ok=True)
    if owner is not None:
        os.chown(base, owner.pw_uid, owner.pw_gid)
        # The postgres user must reach its data directory through the temporary tree.
        for parent in base.parents:
            if str(parent).startswith(("/tmp/", "/var/tmp/")):
                os.chmod(parent, os.stat(parent).st_mode | 0o011)  # noqa: S103 - search only
    env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    subprocess.run(
        [str(bindir / "initdb"), "-D", str(datadir), "-U", SUPERUSER, "--auth=trust",
         "--no-sync", "-E", "UTF8"],
        check=True, capture_output=True, env=env, **_as_owner(owner),
    )
    log = open(base / "postgres.log", "ab")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(
        [str(bindir / "postgres"), "-D", str(datadir), "-p", str(port),
         "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={base}",
         "-c", "fsync=off", "-c", "max_connections=200"],
        stdout=log, stderr=subprocess.STDOUT, env=env, **_as_owner(owner),
    )
    try:
        # A hang guard: the idle lane (scripts/test-lanes) may wait long for a processor.
        deadline = time.monotonic() + 300
        while True:
            ready = subprocess.run([str(bindir / "pg_isready"), "-h", "127.0.0.1", "-p",
                                    str(port)], capture_output=True, check=False)
            if ready.returncode == 0:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("PostgreSQL did not start: "
                                   + (base / "postgres.log").read_text(errors="replace")[-2000:])
            time.sleep(0.1)
        yield PostgresServer(port, datadir)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # "fast" shutdown
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
        shutil.rmtree(base, ignore_errors=True)

"""The services' Alembic migrations are package data: a wheel of the project carries every
service's ``migrations/`` (env.py, script template, revisions), and ``net-gateway`` installed
from it into a virtualenv of its own, started away from the source tree, migrates its database
from the installed package."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import free_port

from .harness import Proc, secret_file, wait_for

pytestmark = [pytest.mark.process, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[3]
SERVICES = ROOT / "ops_tools" / "services"


def test_installed_gateway_migrates_from_its_package(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels),
                    str(ROOT)], check=True, timeout=300, cwd=tmp_path)
    [wheel] = wheels.glob("net_ops_tools-*.whl")

    shipped = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        str(path.relative_to(ROOT))
        for path in SERVICES.glob("*/migrations/**/*")
        if path.is_file() and path.suffix in {".py", ".mako"} and "__pycache__" not in path.parts
    }
    assert {p.split("/")[2] for p in expected} >= {"attestation", "faucet", "gateway",
                                                   "indexer"}
    assert expected <= shipped, sorted(expected - shipped)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-deps", str(wheel)],
                   check=True, timeout=300)
    # The project's dependencies from the development virtualenv (appended after the new
    # virtualenv's own site-packages, whose ops_tools comes first; the development
    # virtualenv's editable-install hook is a .pth of its own and is not run from here).
    site = Path(subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, capture_output=True, text=True).stdout.strip())
    (site / "zz-project-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import ops_tools.services.gateway.database as d; print(d.MIGRATIONS)"],
        check=True, capture_output=True, text=True, cwd=tmp_path).stdout.strip()
    assert where.startswith(str(site)), where

    run = tmp_path / "run"
    run.mkdir()
    port = free_port()
    config = run / "gateway.yml"
    config.write_text(yaml.safe_dump({
        "listen_port": port, "state_dir": str(run / "state"),
        "rpc_url": f"ws://127.0.0.1:{free_port()}",  # no chain: migrating needs none
        "genesis_hash": "0x" + "ab" * 32,
        "worker_secret_file": str(secret_file(run / "worker.secret", "packaging-test-secret")),
        "log_level": "warning",
    }))
    # Started in a directory away from the source tree (the harness's Proc runs in the
    # current directory, the checkout).
    proc = Proc([str(venv / "bin" / "net-gateway"), "--config", str(config)],
                run / "gateway.log")
    with (run / "gateway.log").open("ab") as log:
        proc.proc = subprocess.Popen(proc.args, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True,
                                     cwd=run, env={"PATH": "/usr/bin:/bin"})
    try:
        wait_for(lambda: httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
                 .status_code == 200, 60, f"the installed net-gateway:\n{proc.tail()}")
    finally:
        proc.stop()
    with sqlite3.connect(run / "state" / "gateway.db") as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        [(revision,)] = db.execute("SELECT version_num FROM gateway_alembic_version").fetchall()
    assert {"gateway_api_keys", "gateway_receipts", "gateway_workers"} <= tables
    heads = sorted(p.stem for p in (SERVICES / "gateway" / "migrations" / "versions").glob("*.py")
                   if p.stem != "__init__")
    assert revision == heads[-1].split("_")[0], (revision, heads)

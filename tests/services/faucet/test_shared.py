"""Faucet instances sharing one PostgreSQL: one set of limits (the salt comes from the database
or from one configured secret), and one signer per seed (the lease)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from substrateinterface import Keypair

from tests.conftest import ROOT
from tests.services.faucet.conftest import DRIP, faucet_config, fresh, run_faucet
from tests.services.postgres import PostgresServer
from tests.support.devnode import DevNode, free_balance, fund

SECOND_SEED = "//FaucetUnderTest/second"


@pytest.fixture(scope="module")
def second_signer(funded_faucet: DevNode) -> str:
    fund(funded_faucet, {Keypair.create_from_uri(SECOND_SEED, ss58_format=42).ss58_address:
                         10**16})
    return SECOND_SEED


def pg_url(server: PostgresServer, tag: str) -> str:
    return server.create_database(f"faucet_{tag}_{time.time_ns()}")


def start(config: Path) -> subprocess.CompletedProcess[str]:
    """A faucet that is expected to refuse to start (it would run until stopped otherwise)."""
    return subprocess.run(
        [sys.executable, "-m", "ops_tools.services.faucet.cli", "--config", str(config)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("NET_")},
    )


@pytest.mark.parametrize("salt", ["database", "file"])
def test_two_instances_on_one_database_enforce_one_limit(
    funded_faucet: DevNode, second_signer: str, postgres_server: PostgresServer,
    tmp_path: Path, salt: str,
) -> None:
    db_url = pg_url(postgres_server, salt)
    extra = {}
    if salt == "file":
        salt_file = tmp_path / "salt"
        salt_file.write_text("one secret salt for every instance\n")
        os.chmod(salt_file, 0o600)
        extra["salt_file"] = str(salt_file)
    limits = {"per_ip": {"count": 3, "window_s": 3600}}
    cfg_a = faucet_config(tmp_path / "a", funded_faucet, database_url=db_url, limits=limits,
                          **extra)
    cfg_b = faucet_config(tmp_path / "b", funded_faucet, database_url=db_url, limits=limits,
                          seed=second_signer, **extra)
    r1, r2, r3, r4 = (fresh(f"shared-{salt}-{i}") for i in range(4))
    with run_faucet(cfg_a) as a, run_faucet(cfg_b) as b:
        first = a.post({"recipient": r1}, headers={"Idempotency-Key": "shared-1"})
        # The same key on the other instance: the same drip, not a second one.
        replay = b.post({"recipient": r1}, headers={"Idempotency-Key": "shared-1"})
        same_recipient = b.post({"recipient": r1})
        second = b.post({"recipient": r2})
        third = a.post({"recipient": r3})
        over_ip = b.post({"recipient": r4})
    assert first.status_code == 200, first.text
    assert replay.status_code == 200 and replay.json() == first.json()
    assert same_recipient.status_code == 429
    assert same_recipient.json()["error"]["code"] == "recipient_limit"
    assert second.status_code == 200 and third.status_code == 200
    assert over_ip.status_code == 429 and over_ip.json()["error"]["code"] == "ip_limit"
    reader = funded_faucet.reader()
    assert [free_balance(reader, r) for r in (r1, r2, r3, r4)] == [DRIP, DRIP, DRIP, 0]
    if salt == "file":  # the configured secret is the key, not a salt kept in the database
        engine = create_engine(db_url)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM faucet_shared")).scalar() == 0
        engine.dispose()


def test_a_second_signer_on_one_seed_refuses_to_start_while_the_lease_is_live(
    funded_faucet: DevNode, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    db_url = pg_url(postgres_server, "lease")
    cfg_a = faucet_config(tmp_path / "a", funded_faucet, database_url=db_url)
    cfg_b = faucet_config(tmp_path / "b", funded_faucet, database_url=db_url)
    with run_faucet(cfg_a) as a:
        refused = start(cfg_b)
        assert a.post({"recipient": fresh("lease-a")}).status_code == 200
    assert refused.returncode == 2, refused.stderr
    assert "signing in another faucet instance" in refused.stderr
    assert f"pid {a.proc.pid}" in refused.stderr
    # The first stopped and gave the lease up: the second starts and signs.
    with run_faucet(cfg_b) as b:
        dest = fresh("lease-b")
        assert b.post({"recipient": dest}).status_code == 200
    assert free_balance(funded_faucet.reader(), dest) == DRIP


def test_a_lease_held_elsewhere_is_honoured_until_it_expires(
    funded_faucet: DevNode, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    db_url = pg_url(postgres_server, "elsewhere")
    cfg = faucet_config(tmp_path, funded_faucet, database_url=db_url)
    with run_faucet(cfg):
        pass  # migrated, and the lease given up again
    engine = create_engine(db_url)
    account = Keypair.create_from_uri("//FaucetUnderTest", ss58_format=42).public_key.hex()
    with engine.begin() as conn:  # an instance on another host signs with this seed
        conn.execute(text(
            "INSERT INTO faucet_signer_leases VALUES (:a, 'holder-on-another-host',"
            " 'faucet-1.other', 4242, :now, :until)"),
            {"a": account, "now": time.time(), "until": time.time() + 3600})
    refused = start(cfg)
    with engine.begin() as conn:  # it stopped renewing an hour ago
        conn.execute(text("UPDATE faucet_signer_leases SET expires_at = :t"),
                     {"t": time.time() - 1})
    engine.dispose()
    assert refused.returncode == 2
    assert "faucet-1.other" in refused.stderr and "pid 4242" in refused.stderr
    with run_faucet(cfg) as faucet:
        assert faucet.post({"recipient": fresh("lease-expired")}).status_code == 200


def test_a_crashed_signer_on_this_host_does_not_block_its_restart(
    funded_faucet: DevNode, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    db_url = pg_url(postgres_server, "crash")
    cfg = faucet_config(tmp_path, funded_faucet, database_url=db_url, signer_lease_s=3600)
    with run_faucet(cfg) as faucet:
        os.killpg(faucet.proc.pid, signal.SIGKILL)  # no chance to give the lease up
        faucet.proc.wait(timeout=30)
    with run_faucet(cfg) as again:
        dest = fresh("after-crash")
        assert again.post({"recipient": dest}).status_code == 200
    assert free_balance(funded_faucet.reader(), dest) == DRIP

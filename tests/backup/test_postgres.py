"""A service database on PostgreSQL: ``pg_dump`` while it is in use, ``pg_restore`` brings the
rows back, and the password never reaches a command line."""

from __future__ import annotations

import tempfile
from pathlib import Path

import psycopg
import pytest

from ops_tools.backup import collect, restore
from ops_tools.backup.locate import ServiceSite
from ops_tools.programs import Program
from tests.conftest import free_port
from tests.services.postgres import running_postgres

pytestmark = pytest.mark.process


@pytest.fixture(scope="module")
def server():
    with running_postgres(Path(tempfile.mkdtemp(prefix="net-pg-")) / "cluster",
                          free_port()) as srv:
        yield srv


def rows(url: str) -> list[tuple]:
    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn) as conn:
        return conn.execute("select v from drips order by v").fetchall()


def test_pg_dump_and_restore_round_trip(server):
    url = server.create_database("faucet_backup")
    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute("create table drips (v text)")
        conn.execute("insert into drips values ('at backup')")
        # an open transaction of the running service does not block the dump
        busy = psycopg.connect(url.replace("+psycopg", ""))
        busy.execute("insert into drips values ('uncommitted')")
        try:
            site = ServiceSite("faucet-0", "faucet", url, Program("systemd", "net-faucet"))
            member = collect.database(site)
        finally:
            busy.rollback()
            busy.close()
        conn.execute("update drips set v = 'after backup'")
    assert member.name == "services/faucet-0/faucet.pgdump"
    assert member.meta == {"service": "faucet", "engine": "postgresql"}
    write = restore.Write(member.name, "database", "faucet-0", "redacted", restore.REPLACE,
                          "postgresql", url)
    restore._write(write, member.data)
    assert rows(url) == [("at backup",)]


def test_the_password_goes_to_libpq_through_the_environment():
    env = collect.pg_env("postgresql+psycopg://svc:s3cret@db.example:5433/faucet")
    assert (env["PGHOST"], env["PGPORT"], env["PGUSER"], env["PGPASSWORD"],
            env["PGDATABASE"]) == ("db.example", "5433", "svc", "s3cret", "faucet")
    assert restore._redacted("postgresql://svc:s3cret@db/faucet") == "postgresql://svc:***@db/faucet"

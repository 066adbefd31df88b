"""The API on a PostgreSQL role that can only read (issue 29: PostgreSQL roles per service):
the processor, which owns the tables, grants the role SELECT; the API program, connected as
that role, answers queries, ``_metadata`` and a subscription (LISTEN needs no grant), and the
role cannot change the index in any way, each write tried and refused by PostgreSQL."""

from __future__ import annotations

import asyncio
import itertools
import json

import psycopg
import pytest
import websockets
from psycopg import sql

from ops_tools.errors import InputError
from ops_tools.services.indexer import app as indexer_app
from ops_tools.services.indexer.config import IndexerSettings
from tests.conftest import free_port
from tests.services.indexer.harness import Indexer
from tests.services.postgres import SUPERUSER, PostgresServer

pytestmark = pytest.mark.process

_names = itertools.count()

# Every kind of change the API's role might attempt; each must be refused for lack of privilege.
WRITES = [
    "INSERT INTO indexer_networks (genesis_hash, active, height, finalized_height, "
    "chain_height, reset_count) VALUES ('0x00', false, 0, 0, 0, 0)",
    "UPDATE indexer_networks SET height = 0",
    "DELETE FROM indexer_transfers",
    "TRUNCATE indexer_events",
    "UPDATE indexer_alembic_version SET version_num = 'x'",
    "CREATE TABLE indexer_planted (i int)",
    "DROP TABLE indexer_blocks",
    "ALTER TABLE indexer_blocks ADD COLUMN planted int",
]


def _roles(server: PostgresServer) -> tuple[str, str]:
    """A database owned by a new writer role, and a new role for the API; their URLs."""
    n = f"{next(_names)}_{free_port()}"
    writer, reader, database = f"ix-writer-{n}", f"ix-api-{n}", f"ix_ro_{n}"
    with psycopg.connect(f"host=127.0.0.1 port={server.port} user={SUPERUSER} dbname=postgres",
                         autocommit=True) as conn:
        for role in (writer, reader):
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(
            sql.Identifier(database), sql.Identifier(writer)))
    url = f"postgresql+psycopg://{{}}@127.0.0.1:{server.port}/{database}"
    return url.format(writer), url.format(reader)


def test_the_api_reads_as_a_role_that_cannot_write(chain, postgres_server, tmp_path):
    writer_url, reader_url = _roles(postgres_server)
    reader = reader_url.split("//", 1)[1].split("@", 1)[0]
    ix = Indexer(tmp_path / "indexer", chain.ws, writer_url, read_only_role=reader,
                 api={"database_url": reader_url})
    ix.start()
    try:
        height = ix.wait_height(2)["height"]
        data = ix.data("{ _metadata { lastProcessedHeight rowCountEstimate { table } } "
                       "blocks(first: 2) { totalCount edges { node { number } } } }")
        assert data["_metadata"]["lastProcessedHeight"] >= height
        assert [e["node"]["number"] for e in data["blocks"]["edges"]] == [0, 1]

        async def one_block() -> dict:
            url = ix.url.replace("http://", "ws://") + "/graphql"
            async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:
                await ws.send(json.dumps({"type": "connection_init"}))
                assert json.loads(await asyncio.wait_for(ws.recv(), 60))["type"] == \
                    "connection_ack"
                await ws.send(json.dumps({"id": "b", "type": "subscribe", "payload": {
                    "query": "subscription { newBlocks { number } }"}}))
                return json.loads(await asyncio.wait_for(ws.recv(), 60))
        msg = asyncio.run(one_block())
        assert msg["type"] == "next" and msg["payload"]["data"]["newBlocks"]["number"] > height

        dsn = reader_url.replace("postgresql+psycopg://", "postgresql://")
        for statement in WRITES:
            with psycopg.connect(dsn) as conn, pytest.raises(
                    psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
        # The role's rights are exactly these: reading the index, nothing else.
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT count(*) FROM indexer_blocks").fetchone()[0] > height
            rights = conn.execute(
                "SELECT DISTINCT privilege_type FROM information_schema.role_table_grants "
                "WHERE grantee = current_user").fetchall()
        assert rights == [("SELECT",)], rights
    finally:
        ix.stop()


def test_a_read_only_api_without_a_migrated_schema_says_what_to_start(postgres_server, tmp_path,
                                                                      monkeypatch):
    _writer_url, reader_url = _roles(postgres_server)
    monkeypatch.setattr(indexer_app, "MIGRATION_WAIT_S", 0.0)
    settings = IndexerSettings(listen_port=free_port(), state_dir=tmp_path,
                               database_url=reader_url)
    with pytest.raises(InputError, match=r"database_url: its role \(ix-api-.*\) may not migrate"
                                         r".*start net-indexer-processor"):
        indexer_app.open_database(settings)


def test_read_only_role_is_checked(postgres_server, tmp_path):
    writer_url, _reader_url = _roles(postgres_server)
    settings = IndexerSettings(listen_port=free_port(), state_dir=tmp_path,
                               database_url=writer_url, read_only_role="no-such-role")
    with pytest.raises(InputError, match="read_only_role: PostgreSQL has no role 'no-such-role'"):
        indexer_app.open_database(settings, writer=True)
    sqlite = IndexerSettings(listen_port=free_port(), state_dir=tmp_path,
                             read_only_role="net-indexer-api")
    with pytest.raises(InputError, match="read_only_role: 'net-indexer-api' is a PostgreSQL "
                                         "role, but database_url is sqlite"):
        indexer_app.open_database(sqlite, writer=True)
    with pytest.raises(ValueError, match="not a PostgreSQL role name"):
        IndexerSettings(listen_port=free_port(), state_dir=tmp_path,
                        read_only_role='x"; DROP TABLE indexer_blocks; --')

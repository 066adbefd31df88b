"""The indexer's migrations on SQLite and PostgreSQL: a database an older release left, with
rows in it, upgraded in place to the indexes the tables declare (tables.py), its rows kept."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, insert, inspect, select

from ops_tools.services.common.db import Database
from ops_tools.services.common.migrations import migrate
from ops_tools.services.indexer import store
from ops_tools.services.indexer.app import MIGRATIONS, VERSION_TABLE
from ops_tools.services.indexer.tables import Base, EventRow, ExtrinsicRow


def _indexes(db: Database, table: str) -> dict[str, list[str]]:
    """The table's indexes, not those of its key and unique constraints."""
    return {i["name"]: list(i["column_names"]) for i in inspect(db.engine).get_indexes(table)
            if not i.get("duplicates_constraint")}


def _declared(table: str) -> dict[str, list[str]]:
    return {i.name: [c.name for c in i.columns]
            for i in Base.metadata.tables[table].indexes if i.name}


def _rows(db: Database) -> dict[str, Any]:
    with db.engine.connect() as c:
        return {t.__tablename__: c.execute(select(func.count()).select_from(t)).scalar_one()
                for t in (EventRow, ExtrinsicRow)}


def test_0005_upgrades_a_database_of_0004_to_the_pallet_indexes(database_url: str) -> None:
    db = Database(database_url)
    try:
        migrate(db, MIGRATIONS, version_table=VERSION_TABLE, revision="0004")
        assert _indexes(db, "indexer_events") == {
            "ix_indexer_events_name": ["network_id", "pallet", "name", "block_number"]}
        with db.session(write=True) as s:
            c = s.connection()
            net = store.ensure_network(c, "0x" + "cd" * 32, "old").id
            c.execute(insert(EventRow), [
                {"network_id": net, "block_number": n, "idx": 0, "extrinsic_idx": 0,
                 "phase": "ApplyExtrinsic", "pallet": "Balances", "name": "Transfer",
                 "args": "{}"} for n in range(5)])
            c.execute(insert(ExtrinsicRow), [
                {"network_id": net, "block_number": n, "idx": 0, "hash": f"0x{n:064x}",
                 "signer": None, "pallet": "Balances", "call": "transfer_keep_alive",
                 "args": "{}", "success": True, "fee": None, "error": None}
                for n in range(5)])
        migrate(db, MIGRATIONS, version_table=VERSION_TABLE)
        for table in Base.metadata.tables:
            assert _indexes(db, table) == _declared(table), table
        assert _indexes(db, "indexer_events") == {
            "ix_indexer_events_pallet": ["network_id", "pallet", "block_number", "idx"],
            "ix_indexer_events_name": ["network_id", "pallet", "name", "block_number", "idx"]}
        assert _rows(db) == {"indexer_events": 5, "indexer_extrinsics": 5}
        # Idempotent: a second start of a service on the upgraded database changes nothing.
        migrate(db, MIGRATIONS, version_table=VERSION_TABLE)
        assert _indexes(db, "indexer_extrinsics") == _declared("indexer_extrinsics")
    finally:
        db.dispose()

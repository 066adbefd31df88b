"""A small service built on the platform, as a service author would write one: the subject of
the platform's tests (it is no part of the suite)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict
from sqlalchemy import Column, Integer, MetaData, String, Table, insert, select

from ops_tools.secrets import read_secret
from ops_tools.services.common import logs
from ops_tools.services.common.app import ServiceInfo, create_app
from ops_tools.services.common.db import Database
from ops_tools.services.common.errors import ApiError
from ops_tools.services.common.migrations import migrate
from ops_tools.services.common.readiness import ChainWatch, database_check
from ops_tools.services.common.server import service_main
from ops_tools.services.common.settings import ServiceSettings

metadata = MetaData()
notes = Table("sample_notes", metadata, Column("id", Integer, primary_key=True),
              Column("text", String(200), nullable=False))
log = logging.getLogger("sample")


class SampleSettings(ServiceSettings):
    service_name = "sample"
    token_file: Path | None = None
    slow_s: float = 1.0


class Note(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str


def build_app(settings: SampleSettings) -> FastAPI:
    db = Database(settings.effective_database_url())
    migrate(db, Path(__file__).parent / "migrations", version_table="sample_alembic_version")
    token = read_secret(settings.token_file, key="token_file") if settings.token_file else None
    if token:
        logs.redact(token)
    watch = ChainWatch(settings.rpc_url, settings.genesis_hash)
    app = create_app(ServiceInfo("sample"), settings,
                     ready_checks=[database_check(db), watch.ready_check()])

    @app.post("/notes", status_code=201)
    def add(note: Note) -> dict[str, int]:
        if not note.text.strip():
            raise ApiError(400, "invalid_field", "text: empty; write something", field="text")
        with db.session(write=True) as s:
            new_id = s.execute(insert(notes).values(text=note.text)).inserted_primary_key[0]
        # A careless author logs the token; the redaction keeps it out of the line.
        log.info("note added with token %s", token)
        return {"id": int(new_id)}

    @app.get("/notes")
    def all_notes() -> list[str]:
        with db.session() as s:
            return list(s.scalars(select(notes.c.text).order_by(notes.c.id)))

    @app.post("/slow")
    async def slow() -> dict[str, bool]:
        await asyncio.sleep(settings.slow_s)
        return {"done": True}

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("internal detail that must not reach the client")

    return app


def main() -> None:
    service_main("sample", SampleSettings, build_app)


if __name__ == "__main__":
    main()

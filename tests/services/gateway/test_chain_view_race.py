"""The gateway's chain view against two reads that overlap: the periodic poll, which asks about
the operators of the workers it knows, and an announcement's admission, which asks about the
announcing operator too. The chain reader is a stand-in (the one I/O it does is the chain read),
so the reads can be ordered as a loaded machine once ordered them: the poll listed its operators,
then waited for the lock while the admission's read let a new worker in; its read, which never
asked about that operator, must not make the worker's operator read as unregistered."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from sqlalchemy import create_engine

from ops_tools.services.gateway.config import GatewaySettings
from ops_tools.services.gateway.router import ChainView, Worker
from ops_tools.services.gateway.service import GatewayState

NEW = "5NewOperator"
KNOWN = "5KnownOperator"


class HeldReader:
    """Answers each read from ``registered``; the first read waits until ``release`` is set."""

    def __init__(self, registered: dict[str, int]) -> None:
        self.registered = registered
        self.asked: list[list[str]] = []
        self.release = threading.Event()

    def read(self, operators: list[str]) -> ChainView:
        self.asked.append(sorted(set(operators)))
        if len(self.asked) == 1:
            assert self.release.wait(30)
        return ChainView(current_epoch=7, min_stake=10,
                         stakes={op: self.registered[op] for op in operators
                                 if op in self.registered})


def _state(tmp_path: Path) -> GatewayState:
    secret = tmp_path / "worker.secret"
    secret.write_text("a worker secret of the test")
    fields = GatewaySettings(listen_port=8005, state_dir=tmp_path, worker_secret_file=secret)
    return GatewayState(fields, create_engine(f"sqlite:///{tmp_path / 'gw.sqlite3'}"),
                        rpc_url="ws://127.0.0.1:9", genesis_hash="0x" + "ab" * 32,
                        worker_secret="a worker secret of the test", settlement_secret=None)


def test_a_poll_that_did_not_ask_about_a_new_operator_keeps_it_admitted(tmp_path):
    state = _state(tmp_path)
    reader = HeldReader({NEW: 50, KNOWN: 50})
    state.reader = reader  # type: ignore[assignment]
    state.router.announce(Worker(f"{KNOWN}@a", KNOWN, "http://a", ("m",), 1))

    async def race() -> None:
        admission = asyncio.create_task(state.admission(NEW))
        while not reader.asked:  # the admission's read is running (held)
            await asyncio.sleep(0.01)
        poll = asyncio.create_task(state.poll_chain())  # lists KNOWN only, then waits
        await asyncio.sleep(0.1)
        reader.release.set()
        assert await admission is None
        # What the announcement does once admitted: store the worker.
        state.router.announce(Worker(f"{NEW}@b", NEW, "http://b", ("m",), 1))
        await poll

    asyncio.run(race())
    assert reader.asked == [sorted([KNOWN, NEW]), [KNOWN]]
    assert state.router.not_admitted(NEW) is None
    assert state.router.not_admitted(KNOWN) is None


def test_an_operator_a_read_asked_about_and_did_not_find_is_unregistered(tmp_path):
    """The other side: what a read asked about, it decides (a deregistered operator is out)."""
    state = _state(tmp_path)
    reader = HeldReader({KNOWN: 50})
    reader.release.set()
    state.reader = reader  # type: ignore[assignment]
    state.router.announce(Worker(f"{KNOWN}@a", KNOWN, "http://a", ("m",), 1))
    asyncio.run(state.poll_chain())
    assert state.router.not_admitted(KNOWN) is None
    del reader.registered[KNOWN]
    asyncio.run(state.poll_chain())
    assert state.router.not_admitted(KNOWN) == "operator not registered on chain"

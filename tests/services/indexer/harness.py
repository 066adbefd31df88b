"""The indexer's two programs as processes on a free port, for tests and benchmarks; and the API
in the test's process, to count the SQL a query runs."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from fastapi.testclient import TestClient
from sqlalchemy import event

from ops_tools.services.common.db import Database
from ops_tools.services.indexer.app import build_app
from ops_tools.services.indexer.config import IndexerSettings
from tests.conftest import free_port

BIN = Path(sys.executable).parent


class Indexer:
    """``net-indexer-processor`` and ``net-indexer`` with one config file."""

    def __init__(self, workdir: Path, rpc_url: str, database_url: str,
                 api: dict[str, Any] | None = None, **extra: Any) -> None:
        """``extra``: keys of both configurations; ``api``: of the API's only."""
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        self.processor_port = free_port()
        common = {"state_dir": str(workdir), "rpc_url": rpc_url, "database_url": database_url,
                  "poll_interval_s": 1.0, **extra}
        self.configs = {"api": workdir / "indexer.yml", "processor": workdir / "processor.yml"}
        self.configs["api"].write_text(yaml.safe_dump({"listen_port": self.port, **common,
                                                       **(api or {})}))
        self.configs["processor"].write_text(
            yaml.safe_dump({"listen_port": self.processor_port, **common}))
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start_processor(self) -> None:
        self._start("processor", "net-indexer-processor")

    def start_api(self) -> None:
        self._start("api", "net-indexer")
        self.wait_for(self._api_up, 60, "the API to answer")

    def start(self) -> Indexer:
        self.start_processor()
        self.start_api()
        return self

    def _start(self, name: str, program: str) -> None:
        log = (self.workdir / f"{name}.log").open("ab")
        self.procs[name] = subprocess.Popen(
            [str(BIN / program), "--config", str(self.configs[name])], stdout=log,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()

    def _api_up(self) -> bool:
        with contextlib.suppress(OSError, urllib.error.URLError):
            self.http("GET", "/health")
            return True
        return False

    def stop(self, name: str | None = None) -> None:
        for key in [name] if name else list(self.procs):
            proc = self.procs.pop(key, None)
            if proc is None or proc.poll() is not None:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)

    def logs(self) -> str:
        out = []
        for name in ("processor", "api"):
            path = self.workdir / f"{name}.log"
            if path.exists():
                out.append(f"--- {name}\n" + "\n".join(path.read_text(errors="replace")
                                                        .splitlines()[-30:]))
        return "\n".join(out)

    def http(self, method: str, path: str, body: Any = None,
             base: str | None = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request((base or self.url) + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                return exc.code, json.loads(raw)
            except ValueError:
                return exc.code, raw.decode(errors="replace")

    def processor_ready(self) -> tuple[int, Any]:
        return self.http("GET", "/ready", base=f"http://127.0.0.1:{self.processor_port}")

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> tuple[int, Any]:
        return self.http("POST", "/graphql", {"query": query, "variables": variables or {}})

    def data(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        status, body = self.graphql(query, variables)
        assert status == 200 and not body.get("errors"), (status, body, self.logs())
        return body["data"]

    def status(self, genesis: str | None = None) -> dict[str, Any] | None:
        status, body = self.graphql(
            "query($g: String) { indexStatus(genesisHash: $g) { height hash finalizedHeight "
            "finalizedHash chainHeight lag genesisHash specVersion resetCount } }", {"g": genesis})
        if status != 200 or body.get("errors"):
            return None
        return body["data"]["indexStatus"]

    def wait_for(self, predicate: Callable[[], Any], timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise AssertionError(f"{name} exited with {proc.returncode}:\n{self.logs()}")
            result = predicate()
            if result:
                return result
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}:\n{self.logs()}")

    def wait_height(self, number: int, timeout: float = 60, genesis: str | None = None) -> dict:
        def reached() -> dict | None:
            st = self.status()
            if st and st["height"] >= number and (genesis is None or st["genesisHash"] == genesis):
                return st
            return None
        return self.wait_for(reached, timeout, f"the index to reach #{number}")


class Api:
    """The API in this process, on the index's database, counting the SQL queries (SELECTs)
    its engine runs."""

    def __init__(self, tmp: Path, rpc_url: str, database_url: str, **extra: object) -> None:
        self.db = Database(database_url)
        settings = IndexerSettings(listen_port=free_port(), state_dir=tmp / "api",
                                   rpc_url=rpc_url, database_url=database_url, **extra)
        self.client = TestClient(build_app(settings, self.db), client=("127.0.0.1", 50000))
        self.statements: list[str] = []
        event.listen(self.db.engine, "before_cursor_execute", self._seen)

    def _seen(self, _conn: object, _cursor: object, statement: str, *_: object) -> None:
        if statement.lstrip().upper().startswith(("SELECT", "WITH")):
            self.statements.append(statement)

    @contextmanager
    def counting(self) -> Iterator[list[str]]:
        self.statements.clear()
        yield self.statements

    def post(self, query: str, variables: dict | None = None) -> tuple[int, dict]:
        resp = self.client.post("/graphql", json={"query": query, "variables": variables or {}})
        return resp.status_code, resp.json()

    def data(self, query: str, variables: dict | None = None) -> dict:
        status, body = self.post(query, variables)
        assert status == 200 and not body.get("errors"), (status, body)
        return body["data"]

    def close(self) -> None:
        self.client.close()
        self.db.engine.dispose()

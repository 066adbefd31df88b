"""Bad JSON is a 400 naming the problem, on every service: the same hostile bodies sent to each
service's real app (built by its own ``build_app`` from its settings, against a development
node), through httpx's ASGI transport, on each of its JSON endpoints."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from ops_tools.services.common import jsonbody
from tests.conftest import free_port
from tests.support.devnode import DevNode


def _secret(path: Path, text: str) -> Path:
    path.write_text(text + "\n")
    os.chmod(path, 0o600)
    return path


def _attestation(tmp: Path, node: DevNode) -> FastAPI:
    from ops_tools.services.attestation.app import build_app
    from ops_tools.services.attestation.config import AttestationSettings

    return build_app(AttestationSettings(
        listen_port=free_port(), state_dir=tmp / "state", rpc_url=node.ws,
        database_url=f"sqlite:///{tmp}/a.db",
        mock_root_seed_file=_secret(tmp / "seed", "hostile-json-test-seed-0123456789")))


def _faucet(tmp: Path, node: DevNode) -> FastAPI:
    from ops_tools.services.faucet.app import build_app
    from ops_tools.services.faucet.config import FaucetSettings

    return build_app(FaucetSettings(
        listen_port=free_port(), state_dir=tmp / "state", rpc_url=node.ws,
        database_url=f"sqlite:///{tmp}/f.db",
        seed_file=_secret(tmp / "seed", "//HostileJsonFaucet")))


def _gateway(tmp: Path, node: DevNode) -> FastAPI:
    from ops_tools.services.gateway.app import build_app
    from ops_tools.services.gateway.config import GatewaySettings

    return build_app(GatewaySettings(
        listen_port=free_port(), state_dir=tmp / "state", rpc_url=node.ws,
        database_url=f"sqlite:///{tmp}/g.db",
        worker_secret_file=_secret(tmp / "worker", "hostile-json-worker-secret-0123")))


def _indexer(tmp: Path, node: DevNode) -> FastAPI:
    from ops_tools.services.indexer.app import build_app
    from ops_tools.services.indexer.config import IndexerSettings

    return build_app(IndexerSettings(listen_port=free_port(), state_dir=tmp / "state",
                                     rpc_url=node.ws, database_url=f"sqlite:///{tmp}/i.db"))


def _explorer(tmp: Path, node: DevNode) -> FastAPI:
    from ops_tools.services.explorer.app import build_app
    from ops_tools.services.explorer.config import ExplorerSettings

    return build_app(ExplorerSettings(listen_port=free_port(), state_dir=tmp / "state",
                                      rpc_url=node.ws))


@dataclass(frozen=True)
class Service:
    build: Callable[[Path, DevNode], FastAPI]
    paths: tuple[str, ...]
    openai_shape: bool = False


SERVICES = {
    "attestation": Service(_attestation, ("/v1/attest", "/v1/verify")),
    "faucet": Service(_faucet, ("/drip-public",)),
    "gateway": Service(_gateway, ("/v1/chat/completions", "/v1/completions", "/v1/embeddings",
                                  "/v1/workers/announce", "/v1/workers/heartbeat"),
                       openai_shape=True),
    "indexer": Service(_indexer, ("/graphql",)),
    # The explorer has no JSON endpoint; its platform middleware refuses a hostile body the same.
    "explorer": Service(_explorer, ("/",)),
}

DEEP = 500
HOSTILE: dict[str, tuple[bytes, str]] = {
    "lone_high_surrogate": (b'{"model": "\\ud800", "operator_id": "x"}', "lone_surrogate"),
    "lone_low_surrogate_key": (b'{"\\udc00": 1}', "lone_surrogate"),
    "surrogate_deep_inside": (b'{"messages": [{"content": ["ok", "\\udbff"]}]}',
                              "lone_surrogate"),
    "nesting_past_the_limit": (b'{"a": ' + b"[" * (jsonbody.MAX_DEPTH + 1)
                               + b"]" * (jsonbody.MAX_DEPTH + 1) + b"}", "too_deep"),
    "nesting_very_deep": (b"[" * DEEP + b"]" * DEEP, "too_deep"),
    "integer_past_u64": (b'{"max_tokens": 18446744073709551616}', "number_out_of_range"),
    "integer_below_i64": (b'{"n": -9223372036854775809}', "number_out_of_range"),
    "integer_of_400_digits": (b'{"n": ' + b"9" * 400 + b"}", "number_out_of_range"),
    "float_overflow": (b'{"temperature": 1e400}', "number_out_of_range"),
    "duplicate_key": (b'{"model": "a", "model": "b"}', "duplicate_key"),
    "nan": (b'{"n": NaN}', "syntax"),
    "not_utf8": (b'{"model": "\xff\xfe"}', "not_utf8"),
    "truncated": (b'{"model": ', "syntax"),
}


@pytest.fixture(scope="module")
def apps(devnode: DevNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    built = {name: svc.build(tmp_path_factory.mktemp(name), devnode)
             for name, svc in SERVICES.items()}
    yield built


def _post(app: FastAPI, path: str, body: bytes) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://svc") as client:
            return await client.post(path, content=body,
                                     headers={"Content-Type": "application/json"})
    return asyncio.run(go())


CASES = [(svc, path, case) for svc, s in SERVICES.items() for path in s.paths
         for case in HOSTILE]


@pytest.mark.parametrize("service, path, case", CASES)
def test_hostile_json_is_a_400_naming_the_problem(apps, service, path, case):
    body, problem = HOSTILE[case]
    response = _post(apps[service], path, body)
    assert response.status_code == 400, (response.status_code, response.text)
    error = response.json()["error"]
    assert error["code"] == "invalid_json"
    assert f"the body is not acceptable JSON: {problem} at" in error["message"]
    if SERVICES[service].openai_shape:
        assert error["type"] == "invalid_request_error"


@pytest.mark.parametrize("service", list(SERVICES))
def test_a_chunked_hostile_body_is_refused_the_same(apps, service):
    """No Content-Length: the middleware reads the chunks up to the limit, then checks."""
    async def chunks():
        yield b'{"a": "\\ud800'
        yield b'"}'

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=apps[service], client=("127.0.0.1", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://svc") as client:
            return await client.post(SERVICES[service].paths[0], content=chunks(),
                                     headers={"Content-Type": "application/json"})

    response = asyncio.run(go())
    assert response.status_code == 400, response.text
    assert "lone_surrogate" in response.json()["error"]["message"]


@pytest.mark.parametrize("service, path", [(s, p) for s, svc in SERVICES.items()
                                           for p in svc.paths if s != "explorer"])
def test_the_same_endpoints_take_well_formed_json_past_the_parser(apps, service, path):
    """The control: a well-formed body with the same shapes (a paired surrogate, 64 levels,
    2^64-1) reaches the handler, which answers for its own reasons, not invalid_json."""
    body = (b'{"model": "\\ud83d\\ude00", "a": ' + b"[" * (jsonbody.MAX_DEPTH - 1)
            + b"]" * (jsonbody.MAX_DEPTH - 1) + b', "n": 18446744073709551615}')
    response = _post(apps[service], path, body)
    assert response.status_code != 500, response.text
    assert "not acceptable JSON" not in response.text, response.text


# A GET's query string carries JSON too (``variables``, ``extensions``), and the platform's body
# check never sees it; the indexer's GraphQL reads it with the same strict parser.
QUERY_STRING_CASES = [case for case in HOSTILE if case != "not_utf8"]  # a URL is text


@pytest.mark.parametrize("param", ["variables", "extensions"])
@pytest.mark.parametrize("case", QUERY_STRING_CASES)
def test_hostile_json_in_a_graphql_query_string_is_a_400_naming_the_problem(apps, case, param):
    body, problem = HOSTILE[case]

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=apps["indexer"], client=("127.0.0.1", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://svc") as client:
            return await client.get("/graphql", params={
                "query": "{ indexStatus { height } }", param: body.decode()},
                headers={"Accept": "application/json"})

    response = asyncio.run(go())
    assert response.status_code == 400, (response.status_code, response.text[:300])
    assert f"invalid_json: {problem} at" in response.text, response.text[:300]


def test_a_well_formed_graphql_query_string_is_answered(apps):
    """The control: the same GET with plain variables reaches the resolver (which answers that
    nothing is indexed yet: no processor runs here)."""
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=apps["indexer"], client=("127.0.0.1", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://svc") as client:
            return await client.get("/graphql", params={
                "query": "query ($n: Int) { blocks(first: $n) { totalCount } }",
                "variables": '{"n": 1}'},
                headers={"Accept": "application/json"})

    response = asyncio.run(go())
    assert response.status_code == 200, response.text[:300]
    assert [e["path"] for e in response.json()["errors"]] == [["blocks"]], response.text[:300]


def test_a_hostile_websocket_message_closes_the_subscription_connection(apps):
    from starlette.testclient import TestClient
    from starlette.websockets import WebSocketDisconnect

    with TestClient(apps["indexer"]) as client, client.websocket_connect(
            "/graphql", subprotocols=["graphql-transport-ws"]) as ws:
        ws.send_text(HOSTILE["nesting_very_deep"][0].decode())
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_text()
    assert closed.value.code == 4400

"""The worker's HTTP hop to its engine, against real loopback servers: a whole answer is relayed
whole however it arrives, within a bound, and idle connections to the engine are let go before
the engine closes them."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import orjson
import pytest
import uvicorn
from aiohttp import web

from ops_tools.worker.app import build_app
from ops_tools.worker.config import WorkerSettings
from ops_tools.worker.engines import EngineFront, make_engine
from ops_tools.worker.engines import base as engine_base

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def _serve(routes: dict[str, Handler]) -> tuple[web.AppRunner, str, list[Any]]:
    """An engine on 127.0.0.1; (runner, base URL, the peer address of each request: one per
    connection the worker opened)."""
    peers: list[Any] = []

    @web.middleware
    async def record(request: web.Request, handler: Handler) -> web.StreamResponse:
        peers.append(request.transport.get_extra_info("peername") if request.transport
                     else None)
        return await handler(request)

    app = web.Application(middlewares=[record])
    for path, handler in routes.items():
        app.router.add_route("*", path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}", peers


def _slow_answer(size: int) -> Handler:
    """A JSON answer of ``size`` bytes, its first 4 KiB at once and the rest 0.3 s later: how a
    busy engine's answer arrives."""

    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        whole = b'{"choices": [{"text": "' + b"x" * (size - 27) + b'"}]}'
        assert len(whole) == size
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.content_length = size
        await response.prepare(request)
        await response.write(whole[:4096])
        await asyncio.sleep(0.3)
        try:
            await response.write(whole[4096:])
            await response.write_eof()
        except ConnectionResetError:
            pass  # the worker refused the answer (over its bound) and hung up
        return response

    return handler


def test_a_whole_answer_is_relayed_whole_however_slowly_it_arrives():
    """Reading what had arrived so far relayed a 300 KB answer as its first 4 KiB (and the
    gateway billed it as an answer)."""
    size = 300_000

    async def run() -> None:
        runner, url, _ = await _serve({"/v1/completions": _slow_answer(size),
                                       "/metrics": _slow_answer(200_000)})
        front = EngineFront([make_engine("vllm", url, [])])
        try:
            answer = await front.answer("/v1/completions", b'{"model": "m"}')
            assert answer.status == 200 and answer.body is not None
            assert len(answer.body) == size and orjson.loads(answer.body)["choices"]
            # The engine's own pages too (a long /metrics page: its gauges may come last).
            status, raw = await front.engines[0]._get("/metrics")  # type: ignore[union-attr]
            assert status == 200 and len(raw) == 200_000
        finally:
            await front.aclose()
            await runner.cleanup()

    asyncio.run(run())


def test_an_answer_over_the_bound_is_a_502_and_its_connection_is_not_reused(monkeypatch):
    monkeypatch.setattr(engine_base, "MAX_ANSWER_BODY", 100_000)

    async def small(request: web.Request) -> web.Response:
        return web.json_response({"choices": [{"text": "ok"}]})

    async def run() -> None:
        runner, url, peers = await _serve({"/v1/completions": _slow_answer(300_000),
                                           "/v1/embeddings": small})
        front = EngineFront([make_engine("openai", url, [])])
        app = build_app(front, None)
        try:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                         base_url="http://worker") as client:
                over = await client.post("/v1/completions", content=b'{"model": "m"}')
                after = await client.post("/v1/embeddings", content=b'{"model": "m"}')
        finally:
            await front.aclose()
            await runner.cleanup()
        assert over.status_code == 502
        assert over.json()["error"]["code"] == "engine_answer_too_large"
        assert "300000 bytes; the limit is 100000" in over.json()["error"]["message"]
        assert after.status_code == 200 and after.json() == {"choices": [{"text": "ok"}]}
        assert peers[0] != peers[1]  # the over-limit answer's connection was closed

    asyncio.run(run())


def test_an_idle_connection_to_the_engine_is_let_go_after_engine_keepalive_s():
    async def small(request: web.Request) -> web.Response:
        return web.json_response({"choices": [{"text": "ok"}]})

    async def run() -> None:
        runner, url, peers = await _serve({"/v1/completions": small})
        engine = make_engine("openai", url, [], keepalive_s=0.5)
        try:
            for pause in (0.0, 0.1, 1.2):
                await asyncio.sleep(pause)
                answer = await engine.answer("/v1/completions", b'{"model": "m"}')
                assert answer.status == 200
        finally:
            await engine.aclose()
            await runner.cleanup()
        # Back to back and after 0.1 s: the pooled connection; after 1.2 s idle: a new one.
        assert peers[0] == peers[1] != peers[2]

    asyncio.run(run())


def test_the_worker_lets_an_idle_engine_connection_go_before_the_engine_closes_it():
    """uvicorn-based engines (vLLM, SGLang) close an idle connection after uvicorn's default
    keep-alive; the worker's default lets go of it first, so it never sends a request on a
    connection the engine is closing."""
    engine_closes_after = uvicorn.Config(app=None).timeout_keep_alive
    settings = WorkerSettings(dev_suri_file="/nonexistent", engine_url="http://127.0.0.1:1")
    assert settings.engine_keepalive_s == engine_base.ENGINE_KEEPALIVE_S
    assert settings.engine_keepalive_s < engine_closes_after


@pytest.mark.parametrize("value", [0, -1, 3601, "soon"])
def test_engine_keepalive_s_out_of_bounds_is_refused_with_its_name(value):
    from ops_tools.errors import InputError
    from ops_tools.worker.config import load

    with pytest.raises(InputError, match="engine_keepalive_s"):
        load(None, {"dev_suri_file": "/nonexistent", "engine_keepalive_s": value})


def test_a_connect_held_past_its_deadline_is_tried_once_more(monkeypatch):
    """CI once saw the worker's connect to a loopback llama.cpp server time out: on a busy
    machine the worker's event loop was held off the processor past the connect deadline, so the
    timer fired before the loop saw the connection made. Here the loop is held (a blocking call
    scheduled beside the first connect) for twice the deadline; nothing was sent, so the worker
    connects again and relays the engine's answer."""
    monkeypatch.setattr(engine_base, "ENGINE_CONNECT_S", 0.5)

    async def small(request: web.Request) -> web.Response:
        return web.json_response({"choices": [{"text": "ok"}]})

    async def run() -> None:
        runner, url, peers = await _serve({"/v1/completions": small})
        loop = asyncio.get_running_loop()
        connect = loop.sock_connect
        connects: list[Any] = []

        async def held(sock: Any, address: Any) -> None:
            connects.append(address)
            if len(connects) == 1:
                loop.call_soon(time.sleep, 1.0)  # the processor is taken away mid-connect
                await asyncio.sleep(0)
            await connect(sock, address)

        monkeypatch.setattr(loop, "sock_connect", held)
        engine = make_engine("openai", url, [])
        try:
            answer = await engine.answer("/v1/completions", b'{"model": "m"}')
        finally:
            await engine.aclose()
            await runner.cleanup()
        assert len(connects) == 2
        assert answer.status == 200 and orjson.loads(answer.body or b"") == {
            "choices": [{"text": "ok"}]}
        assert len(peers) == 1  # the request itself was sent once

    asyncio.run(run())


def test_an_engine_that_takes_no_connection_is_a_502_in_openais_shape():
    """An engine that is down: the worker answers the gateway (which then asks another worker)
    in the API's own error shape, not with a traceback and a bare 500."""
    with socket.socket() as bound:  # bound and never listening: every connect is refused
        bound.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{bound.getsockname()[1]}"

        async def run() -> httpx.Response:
            front = EngineFront([make_engine("vllm", url, [])])
            try:
                async with httpx.AsyncClient(transport=httpx.ASGITransport(
                        app=build_app(front, None)), base_url="http://worker") as client:
                    return await client.post("/v1/completions", content=b'{"model": "m"}')
            finally:
                await front.aclose()

        answer = asyncio.run(run())
    assert answer.status_code == 502
    error = answer.json()["error"]
    assert error["code"] == "engine_unreachable" and error["type"] == "server_error"
    assert f"the vllm engine at {url} cannot be reached" in error["message"]

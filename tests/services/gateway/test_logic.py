"""Pure logic of the gateway: router eligibility and choice, pricing, request bounds, SSE, the
announcement signature, and the test engine's determinism and token counts."""

from __future__ import annotations

import asyncio
import random
import time

import orjson
import pytest
from substrateinterface import Keypair

from ops_tools.chain.wire.announce import sign_announce, verify_announce
from ops_tools.chain.wire.worker_token import worker_token
from ops_tools.services.gateway import endpoints, usage, wire
from ops_tools.services.gateway.openai_errors import OpenAIError
from ops_tools.services.gateway.pricing import Price
from ops_tools.services.gateway.router import ChainView, Router, RouterPolicy, Worker
from ops_tools.sse import EventSplitter, LineTooLong, StreamTally, classify
from ops_tools.worker import test_engine

GENESIS = "0x" + "ab" * 32


def _router() -> Router:
    r = Router(RouterPolicy(failures_before_cooldown=2, cooldown_s=10))
    r.chain = ChainView(current_epoch=10, min_stake=100, stakes={"A": 100, "B": 500, "C": 99})
    for op, cap in (("A", 4), ("B", 4), ("C", 4)):
        w = r.announce(Worker(f"{op}@x", op, f"http://{op}", ("m",), cap))
        w.healthy = True
        r.heartbeat(op, 10)
    return r


def test_eligibility_rules():
    r = _router()
    assert r.why_not(r.workers["A@x"], 0) is None
    assert "below MinStake" in r.why_not(r.workers["C@x"], 0)
    r.chain.stakes.pop("A")
    assert r.why_not(r.workers["A@x"], 0) == "operator not registered on chain"
    r.chain.stakes["A"] = 100
    r.chain.current_epoch = 11  # the epoch before still counts
    assert r.why_not(r.workers["A@x"], 0) is None
    r.chain.current_epoch = 12  # two epochs old: stale
    assert "heartbeat stale" in r.why_not(r.workers["A@x"], 0)
    r.heartbeat("A", 12)
    r.heartbeat("A", 5)  # an older one never lowers the latest
    assert r.heartbeats["A"] == 12
    r.workers["A@x"].healthy = False
    assert r.why_not(r.workers["A@x"], 0) == "health check failing"


def test_one_failed_health_check_in_a_row_is_forgiven_two_take_the_worker_out():
    r = Router(RouterPolicy(checks_before_down=2))
    r.chain = ChainView(current_epoch=10, min_stake=100, stakes={"A": 100})
    r.heartbeat("A", 10)
    w = r.announce(Worker("A@x", "A", "http://A", ("m",), 4))
    r.checked(w, False)  # never passed: not routed to
    assert r.why_not(w, 0) == "health check failing"
    r.checked(w, True)
    assert r.why_not(w, 0) is None
    r.checked(w, False)  # a check timed out on a busy host
    assert r.pick("m", 0) is w
    r.checked(w, True)  # a pass clears the count: failures must be in a row
    r.checked(w, False)
    assert r.pick("m", 0) is w
    r.checked(w, False)
    assert r.why_not(w, 0) == "health check failing" and r.pick("m", 0) is None
    r.checked(w, True)
    assert r.pick("m", 0) is w


def test_least_busy_and_capacity_and_exclude():
    r = _router()
    a, b = r.workers["A@x"], r.workers["B@x"]
    a.inflight = 2
    assert r.pick("m", 0) is b
    b.inflight = 3
    assert r.pick("m", 0) is a
    a.inflight = b.inflight = 4  # full
    assert r.pick("m", 0) is None
    a.inflight = 0
    assert r.pick("m", 0, exclude=["A@x"]) is None
    assert r.pick("other", 0) is None


def test_equally_loaded_workers_share_the_traffic():
    r = _router()
    r.rng = random.Random(7)
    a, b = r.workers["A@x"], r.workers["B@x"]
    picks = [r.pick("m", 0).worker_id for _ in range(400)]
    assert set(picks) == {"A@x", "B@x"}  # C is below MinStake
    assert 150 <= picks.count("A@x") <= 250
    a.inflight = 1  # a load difference still decides
    assert {r.pick("m", 0).worker_id for _ in range(50)} == {"B@x"}
    b.inflight = 1
    assert {r.pick("m", 0).worker_id for _ in range(50)} == {"A@x", "B@x"}


def test_admission_is_the_chain_part_of_eligibility():
    r = _router()
    assert r.not_admitted("A") is None and r.not_admitted("B") is None
    assert r.not_admitted("C") == "stake 99 below MinStake 100"
    assert r.not_admitted("Z") == "operator not registered on chain"


def test_worker_tokens_are_bound_to_one_worker_and_one_network():
    key = b"k" * 32
    a = worker_token(key, GENESIS, "A@http://a")
    assert a == worker_token(key, GENESIS, "A@http://a")  # every instance derives the same
    others = {worker_token(key, GENESIS, "B@http://a"), worker_token(key, GENESIS, "A@http://b"),
              worker_token(key, "0x" + "cd" * 32, "A@http://a"),
              worker_token(b"j" * 32, GENESIS, "A@http://a")}
    assert a not in others and len(others) == 4


@pytest.mark.parametrize("endpoint", [
    "http://127.0.0.1:8101", "http://10.0.0.7", "http://192.168.1.2:80/x", "http://172.16.0.1",
    "http://169.254.169.254/latest", "http://[::1]:80", "http://[fe80::1]", "http://[fd00::1]",
    "http://[::ffff:127.0.0.1]", "http://0.0.0.0:80", "http://100.64.0.1", "http://224.0.0.1",
])
def test_non_public_addresses_are_refused_unless_allowed(endpoint):
    problem = asyncio.run(endpoints.endpoint_problem(endpoint, allow_private=False))
    assert problem is not None and "allow_private_endpoints" in problem
    assert asyncio.run(endpoints.endpoint_problem(endpoint, allow_private=True)) is None


def test_names_are_judged_by_every_address_they_resolve_to():
    def judge(*addresses: str) -> str | None:
        async def resolve(host: str) -> list[str]:  # a stand-in name server
            assert host == "worker.example"
            return list(addresses)

        return asyncio.run(endpoints.endpoint_problem(
            "https://worker.example:8443", allow_private=False, resolve=resolve))

    assert judge("93.184.216.34") is None
    assert "10.0.0.5" in judge("93.184.216.34", "10.0.0.5")  # one private address is enough
    assert "does not resolve" in judge()
    assert endpoints.is_public("2606:4700::1111") and not endpoints.is_public("::1")
    # A real name of this host: localhost resolves to loopback.
    local = asyncio.run(endpoints.endpoint_problem("http://localhost:9", allow_private=False))
    assert local is not None and ("127.0.0.1" in local or "::1" in local)


def test_connections_refuse_a_name_that_resolves_to_a_private_address():
    """The resolver the gateway's upstream client uses when private endpoints are not allowed:
    a name admitted while public that now resolves to loopback is refused at connection."""
    async def connect() -> None:
        resolver = endpoints.PublicResolver()
        try:
            await resolver.resolve("localhost", 80)
        finally:
            await resolver.close()

    with pytest.raises(OSError, match="allow_private_endpoints"):
        asyncio.run(connect())


def test_cooldown_after_repeated_failures():
    r = _router()
    a = r.workers["A@x"]
    r.failed(a, now=100)
    assert r.why_not(a, 100) is None  # one failure: still eligible
    r.failed(a, now=100)
    assert "cooling down" in r.why_not(a, 105)
    assert r.why_not(a, 110.5) is None
    r.failed(a, 120)
    r.succeeded(a)
    r.failed(a, 121)
    assert r.why_not(a, 121) is None  # a success in between resets the count


def test_live_models_only_eligible():
    r = _router()
    r.announce(Worker("A@y", "A", "http://y", ("e",), 1))  # never health-checked
    assert set(r.live_models(0)) == {"m"}
    assert r.serves("e") and not r.serves("zzz")


def test_price_rounds_up():
    assert Price(1000, 2000).cost(1, 1) == 3
    assert Price(1_000_000, 2_000_000).cost(1500, 500) == 2_500_000
    assert Price(1, 1).cost(1, 0) == 1
    assert Price(0, 0).cost(10, 10) == 0


def _parse(kind: str, body: object, **kw: int) -> wire.ParsedRequest:
    return wire.parse(kind, orjson.dumps(body), default_max_tokens=kw.get("default", 64),
                      max_tokens_cap=kw.get("cap", 1000))


def test_parse_bounds_and_rewrites():
    p = _parse("chat", {"model": "m", "messages": [{"role": "user", "content": "héllo"}]})
    assert p.max_input_tokens == len("héllo".encode()) + len("user") + 4
    assert p.max_output_tokens == 64 and p.body["max_tokens"] == 64
    p = _parse("chat", {"model": "m", "messages": [{"role": "user", "content": "x"}],
                        "stream": True, "max_tokens": 5})
    assert p.stream and not p.client_wants_usage and p.max_output_tokens == 5
    assert p.body["stream_options"] == {"include_usage": True}
    p = _parse("text", {"model": "m", "prompt": "a b", "stream": True,
                        "stream_options": {"include_usage": True}})
    assert p.client_wants_usage
    p = _parse("embeddings", {"model": "e", "input": ["ab", "c"]})
    assert (p.max_input_tokens, p.max_output_tokens) == (3, 0)


@pytest.mark.parametrize(("kind", "body", "param"), [
    ("chat", {"messages": [{"role": "user", "content": "x"}]}, "model"),
    ("chat", {"model": "m"}, "messages"),
    ("chat", {"model": "m", "messages": ["x"]}, "messages[0]"),
    ("chat", {"model": "m", "messages": [{"role": "u"}], "max_tokens": 0}, "max_tokens"),
    ("chat", {"model": "m", "messages": [{"role": "u"}], "max_tokens": 5000}, "max_tokens"),
    ("chat", {"model": "m", "messages": [{"role": "u"}], "stream": "yes"}, "stream"),
    ("text", {"model": "m", "prompt": 3}, "prompt"),
    ("embeddings", {"model": "m", "input": ""}, "input"),
])
def test_parse_names_the_param(kind, body, param):
    with pytest.raises(OpenAIError) as info:
        _parse(kind, body)
    assert info.value.status == 400 and info.value.param == param
    assert info.value.body()["error"]["type"] == "invalid_request_error"


def test_parse_rejects_non_json():
    with pytest.raises(OpenAIError) as info:
        wire.parse("chat", b"{nope", default_max_tokens=1, max_tokens_cap=1)
    assert info.value.status == 400


def test_sse_splitter_and_usage():
    splitter = EventSplitter(1024)
    tally = StreamTally()
    usage_chunk = {"id": "x", "choices": [], "usage": {"prompt_tokens": 3,
                                                        "completion_tokens": 4}}
    data = (b'data: {"choices":[{"delta":{"content":"a"}}],"usage":null}\n\n'
            + b"data: " + orjson.dumps(usage_chunk) + b"\n\ndata: [DONE]\n\n")
    events = []
    for i in range(0, len(data), 7):  # arbitrary chunk boundaries
        events += splitter.feed(data[i:i + 7])
    assert len(events) == 3
    assert [classify(e, tally) for e in events] == [False, True, False]
    assert (tally.prompt_tokens, tally.completion_tokens, tally.done) == (3, 4, True)


def test_announce_signature_binds_every_field():
    kp = Keypair.create_from_uri("//Operator1", ss58_format=42)
    now = int(time.time())
    payload = sign_announce(kp, endpoint="http://127.0.0.1:9", models=["m"], capacity=3,
                            timestamp=now, genesis_hash=GENESIS)
    assert verify_announce(payload, expected_genesis_hash=GENESIS, now=now) is None
    for field, value in (("endpoint", "http://127.0.0.1:10"), ("models", ["m", "n"]),
                         ("capacity", 4), ("timestamp", now + 1)):
        assert "signature" in verify_announce({**payload, field: value},
                                              expected_genesis_hash=GENESIS, now=now)
    assert "genesis" in verify_announce(payload, expected_genesis_hash="0x" + "cd" * 32, now=now)
    assert "clock" in verify_announce(payload, expected_genesis_hash=GENESIS, now=now + 1000)
    other = Keypair.create_from_uri("//Operator2", ss58_format=42)
    assert "signature" in verify_announce({**payload, "operator": other.ss58_address},
                                          expected_genesis_hash=GENESIS, now=now)
    assert "keys" in verify_announce({**payload, "x": 1}, expected_genesis_hash=GENESIS, now=now)


def test_test_engine_is_deterministic_and_counts_honestly():
    body = {"model": "net-test-chat", "messages": [{"role": "user", "content": "one two three"}],
            "max_tokens": 5}
    a, b = test_engine.complete("chat", body), test_engine.complete("chat", body)
    assert a["choices"][0]["message"]["content"] == b["choices"][0]["message"]["content"]
    text = a["choices"][0]["message"]["content"]
    assert a["usage"] == {"prompt_tokens": 3, "completion_tokens": len(text.split()),
                          "total_tokens": 3 + len(text.split())}
    assert len(text.split()) == 5
    chunks = list(test_engine.stream("chat", {**body, "stream": True,
                                              "stream_options": {"include_usage": True}}))
    streamed = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks
                       if c["choices"])
    assert streamed == text
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 5
    emb = test_engine.embed({"model": "e", "input": ["a b", "c"]})
    assert emb["usage"]["prompt_tokens"] == 3 and len(emb["data"]) == 2
    assert emb["data"][0]["embedding"] != emb["data"][1]["embedding"]


@pytest.mark.parametrize("prompt,completion,why", [
    (-1_000_000_000, 3, "prompt_tokens=-1000000000 is negative"),
    (2**63, 3, "prompt_tokens=9223372036854775808 is over the bound 100"),
    (5, 2**63, "completion_tokens=9223372036854775808 is over the bound 10"),
    (1.5, 3, "prompt_tokens=1.5 is not an integer"),
    ("7", 3, "prompt_tokens='7' is not an integer"),
    (True, 3, "prompt_tokens=True is not an integer"),
    (None, 3, "prompt_tokens missing"),
    (5, 11, "completion_tokens=11 is over the bound 10"),
])
def test_usage_a_worker_cannot_vouch_for_is_replaced_by_the_gateways_count(
        prompt, completion, why):
    billed = usage.bill(prompt, completion, input_bound=100, output_bound=10,
                        count=lambda: (4, 50))
    # The gateway's count, itself capped by the bounds; the lie is named on the receipt.
    assert (billed.input_tokens, billed.output_tokens) == (4, 10)
    assert billed.discrepancy is not None and why in billed.discrepancy


def test_usage_within_bounds_is_billed_as_reported_without_counting():
    def never() -> tuple[int, int]:
        raise AssertionError("an honest answer is not counted")

    assert usage.bill(100, 0, input_bound=100, output_bound=10, count=never) == usage.Billed(
        100, 0, None)


def test_gateway_word_counts():
    assert usage.prompt_words("chat", {"messages": [
        {"role": "user", "content": "two words"},
        {"role": "user", "content": [{"type": "text", "text": "three more  words"}]}]}) == 6
    assert usage.prompt_words("text", {"prompt": [1, 2, 3]}) == 3
    assert usage.answer_words({"choices": [{"message": {"content": "a b c"}}]}) == 3
    assert usage.answer_words({"choices": [{"text": " x  y "}]}) == 2
    assert usage.answer_words(["not", "a", "completion"]) == 0


def test_sse_line_limit():
    splitter = EventSplitter(16)
    assert splitter.feed(b"data: short\n\n") == [b"data: short"]
    with pytest.raises(LineTooLong):
        splitter.feed(b"data: " + b"x" * 20)  # no newline yet: still refused as it grows

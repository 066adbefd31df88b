"""Routing by the engine load a worker reports in its /health (``engine_load``): the gateway
uses it to send traffic to the idler engine, but it is the worker's claim: bounded, and never a
way for a worker to look idler than the gateway's own count of what it sent there."""

from __future__ import annotations

import orjson
import pytest

from ops_tools.services.gateway.router import ChainView, Router, Worker, engine_load_claim


def _router() -> tuple[Router, Worker, Worker]:
    r = Router()
    r.chain = ChainView(current_epoch=3, min_stake=1, stakes={"A": 1, "B": 1})
    a = r.announce(Worker("A@x", "A", "http://a", ("m",), 8))
    b = r.announce(Worker("B@x", "B", "http://b", ("m",), 8))
    for w in (a, b):
        w.healthy = True
        r.heartbeat(w.operator, 3)
    return r, a, b


def _health(running: object, waiting: object) -> bytes:
    return orjson.dumps({"status": "ok", "engine_load": {"running": running, "waiting": waiting}})


def test_the_engine_with_the_shorter_queue_takes_the_request():
    r, a, b = _router()
    a.reported_load = engine_load_claim(_health(2, 5), a.capacity)  # e.g. other traffic
    b.reported_load = engine_load_claim(_health(1, 0), b.capacity)
    assert {r.pick("m", 0).worker_id for _ in range(20)} == {"B@x"}
    b.reported_load = engine_load_claim(_health(4, 6), b.capacity)
    assert {r.pick("m", 0).worker_id for _ in range(20)} == {"A@x"}


def test_under_reporting_does_not_attract_more_than_the_gateway_already_sent():
    """The attack: a worker with 6 of the gateway's requests in flight claims an idle engine."""
    r, a, b = _router()
    a.inflight = 6
    a.reported_load = engine_load_claim(_health(0, 0), a.capacity)
    b.inflight = 1
    assert {r.pick("m", 0).worker_id for _ in range(20)} == {"B@x"}


@pytest.mark.parametrize("raw", [
    _health(-1, 0), _health(0, -5), _health(True, 0), _health(1.5, 0), _health("3", 0),
    _health(None, 0), orjson.dumps({"engine_load": [1, 2]}), orjson.dumps([1]), b"not json",
    b"", orjson.dumps({"status": "ok"}),
])
def test_a_malformed_claim_counts_as_no_claim(raw):
    assert engine_load_claim(raw, 8) == 0


def test_an_absurd_claim_is_bounded():
    assert engine_load_claim(_health(2**63, 2**63), 8) == 32
    assert engine_load_claim(b'{"engine_load": {"running": 1e400, "waiting": 0}}', 8) == 0
    huge = b'{"engine_load": {"running": 100000000000000000000000000000, "waiting": 0}}'
    assert engine_load_claim(huge, 8) == 0  # beyond 64 bits: a float, not a count
    assert engine_load_claim(_health(3, 4), 8) == 7

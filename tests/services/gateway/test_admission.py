"""Attacks on the gateway's worker-facing boundary, each performed against real processes (a
development node, ``net-gateway``, ``net-worker``) and real loopback HTTP servers playing the
attacker's endpoints:

- an unregistered key announces its own server: 403, and the server is never contacted;
- a flood of announcements does not grow the worker list; one operator's workers are capped;
- an announcement nobody renews expires, and its endpoint is contacted no more;
- the token an announced endpoint captures opens no other worker, and announcing another
  operator's worker gets nothing from it;
- loopback, private and link-local endpoints are refused when the deployment does not allow them;
- two equally loaded workers share 40 sequential requests;
- an operator sees its own workers only, by a fresh request its key signed: another operator,
  a forged, stale or anonymous request, or a heartbeat passed off as one, sees none of them.
"""

from __future__ import annotations

import time

import httpx
import pytest
from substrateinterface import Keypair

from ops_tools.chain.wire.announce import sign_announce
from ops_tools.chain.wire.heartbeat import sign_heartbeat
from ops_tools.chain.wire.worker_view_request import sign_view_request

from .conftest import TOKEN, make_key
from .harness import (
    LoopbackServer,
    live_models,
    register,
    start_gateway,
    start_worker,
    transfer,
    wait_for,
)

pytestmark = pytest.mark.timeout(300)
# Long enough for several health checks (every 0.5 s) and registry refreshes (every 0.3 s).
SETTLE_S = 3.0


@pytest.fixture(scope="module")
def key(engine) -> str:
    return make_key(engine)


@pytest.fixture
def attacker():
    server = LoopbackServer()
    try:
        yield server
    finally:
        server.stop()


def announce(gateway, keypair: Keypair, endpoint: str, models=("atk-model",)) -> httpx.Response:
    payload = sign_announce(keypair, endpoint=endpoint, models=list(models), capacity=4,
                            timestamp=int(time.time()),
                            genesis_hash=gateway.workers()["genesis_hash"])
    return httpx.post(gateway.url + "/v1/workers/announce", json=payload, timeout=30)


def registered(chain, uri: str) -> Keypair:
    keypair = Keypair.create_from_uri(uri, ss58_format=42)
    transfer(chain, "//Alice", keypair.ss58_address, 5 * TOKEN)
    register(chain, uri, 2 * TOKEN)
    return keypair


def rows_of(gateway, operator: str) -> list[dict]:
    return [w for w in gateway.workers()["workers"] if w["operator"] == operator]


def chat(gateway, key: str, model: str, auth: str | None = None, url: str | None = None):
    return httpx.post((url or gateway.url) + "/v1/chat/completions",
                      headers={"Authorization": auth or f"Bearer {key}"}, timeout=30,
                      json={"model": model, "max_tokens": 3,
                            "messages": [{"role": "user", "content": "hi"}]})


def test_unregistered_announcements_are_refused_and_never_contacted(gateway, attacker):
    before = len(gateway.workers()["workers"])
    fresh = Keypair.create_from_mnemonic(Keypair.generate_mnemonic(), ss58_format=42)
    refused = announce(gateway, fresh, attacker.url)
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "operator_not_admitted" and error["param"] == "operator"
    assert "not registered on chain" in error["message"] and "MinStake" in error["message"]
    assert "worker_token" not in refused.text
    # A flood: 20 announcements from 20 fresh keys, each for another path of the server.
    for i in range(20):
        flood = Keypair.create_from_mnemonic(Keypair.generate_mnemonic(), ss58_format=42)
        assert announce(gateway, flood, f"{attacker.url}/{i}").status_code == 403
    time.sleep(SETTLE_S)
    assert len(gateway.workers()["workers"]) == before
    assert attacker.seen == []  # no health check, nothing else


def test_one_operator_is_capped_and_unrenewed_workers_expire(chain, gateway, attacker):
    flooder = registered(chain, "//GwFlooder")
    answers = [announce(gateway, flooder, f"{attacker.url}/{i}") for i in range(20)]
    accepted = [a for a in answers if a.status_code == 200]
    assert len(accepted) == 4  # max_workers_per_operator's default
    capped = answers[-1].json()["error"]
    assert answers[-1].status_code == 403 and capped["code"] == "too_many_workers"
    assert "max_workers_per_operator" in capped["message"]
    # Renewing an admitted one is not a new worker: still accepted.
    assert announce(gateway, flooder, f"{attacker.url}/0").status_code == 200
    assert len(rows_of(gateway, flooder.ss58_address)) == 4
    wait_for(lambda: attacker.seen, 10, "the admitted endpoints' health checks")
    # Nobody renews them: forgotten after worker_ttl_s (15 s here), and contacted no more.
    wait_for(lambda: not rows_of(gateway, flooder.ss58_address), 60, "the workers to expire")
    time.sleep(SETTLE_S)  # a health check already under way may still land
    seen = len(attacker.seen)
    time.sleep(SETTLE_S)
    assert len(attacker.seen) == seen
    # Expired ones no longer count against the cap.
    assert announce(gateway, flooder, f"{attacker.url}/new").status_code == 200


def test_a_captured_token_opens_no_other_worker(tmp_path, chain, gateway, worker, key,
                                                attacker):
    """The thief is a registered operator whose worker process announces the thief's own
    server, and then the honest operator's worker, as its endpoint."""
    thief = registered(chain, "//GwThief")
    w1 = start_worker(tmp_path, chain, gateway.url, name="thief1", dev_uri="//GwThief",
                      extra={"public_url": attacker.url, "models": ["thief-model"]})
    try:
        wait_for(lambda: live_models(gateway).get("thief-model"), 60, "the thief's endpoint")
        served = chat(gateway, key, "thief-model")
        assert served.status_code == 200 and served.headers["x-net-operator"] == thief.ss58_address
        posts = [s for s in attacker.seen if s.method == "POST"]
        captured = posts[-1].headers["authorization"]
        assert captured.startswith("Bearer nwt-")
        checks = [s for s in attacker.seen if s.method == "GET"]
        assert checks and all("authorization" not in s.headers for s in checks)
        # The captured token against the honest operator's worker, straight: refused.
        stolen = chat(gateway, key, "net-test-chat", auth=captured, url=worker.url)
        assert stolen.status_code == 401
        assert chat(gateway, key, "net-test-chat", url=worker.url).status_code == 401  # API key
    finally:
        w1.proc.stop()

    # The thief announces the honest worker's URL as its own: the gateway sends that worker the
    # thief's token for it, which the honest worker refuses; every request is still served, by
    # the honest operator, and the thief's entry goes into cooldown.
    w2 = start_worker(tmp_path, chain, gateway.url, name="thief2", dev_uri="//GwThief",
                      extra={"public_url": worker.url, "models": ["net-test-chat"]})
    try:
        wait_for(lambda: live_models(gateway).get("net-test-chat") == 2, 60,
                 "the thief's entry at the honest worker's URL to pass its health check")

        for _ in range(60):
            response = chat(gateway, key, "net-test-chat")
            assert response.status_code == 200
            assert response.headers["x-net-operator"] == worker.operator
            if any("cooling down" in (r["reason"] or "")
                   for r in rows_of(gateway, thief.ss58_address)):
                break
        else:
            raise AssertionError("the thief's entry never failed: was it ever tried?")
    finally:
        w2.proc.stop()


def view(gateway, body) -> httpx.Response:
    return httpx.post(gateway.url + "/v1/workers/mine", json=body, timeout=30)


def test_an_operator_sees_its_own_workers_only(chain, gateway, worker, attacker):
    genesis = gateway.workers()["genesis_hash"]
    viewer, nosy = registered(chain, "//GwViewer"), registered(chain, "//GwNosy")
    assert announce(gateway, viewer, f"{attacker.url}/view").status_code == 200

    def signed(keypair: Keypair, **change) -> dict:
        return sign_view_request(keypair, timestamp=change.pop("timestamp", int(time.time())),
                                 genesis_hash=change.pop("genesis_hash", genesis))

    own = view(gateway, signed(viewer))
    assert own.status_code == 200, own.text
    assert [r["operator"] for r in own.json()["workers"]] == [viewer.ss58_address]
    assert worker.operator not in own.text
    # Another registered operator, signing its own request, sees nothing of the viewer's.
    other = view(gateway, signed(nosy))
    assert other.status_code == 200 and other.json()["workers"] == []
    assert viewer.ss58_address not in other.text and worker.operator not in other.text

    def refused(body, why: str) -> None:
        answer = view(gateway, body)
        assert answer.status_code == 401, answer.text
        error = answer.json()["error"]
        assert error["code"] == "invalid_view_request" and why in error["message"], error
        assert "workers" not in answer.json() and attacker.url not in answer.text

    # The nosy operator signs and names the viewer; or names it in the request it signed.
    forged = signed(nosy) | {"operator": viewer.ss58_address}
    refused(forged, "does not verify")
    refused(signed(viewer, timestamp=int(time.time()) - 3600), "from the gateway's clock")
    refused(signed(viewer, genesis_hash="0x" + "ab" * 32), "is not this network's")
    heartbeat = sign_heartbeat(viewer, epoch=1, timestamp=int(time.time()),
                               genesis_hash=genesis)
    refused(heartbeat, "exactly the keys")
    refused({}, "exactly the keys")  # anonymous
    assert httpx.get(gateway.url + "/v1/workers/mine", timeout=30).status_code == 405


def test_private_endpoints_are_refused_when_not_allowed(tmp_path, chain, attacker):
    strict = start_gateway(tmp_path / "strict", chain, f"sqlite:///{tmp_path / 'strict.db'}",
                           settle=False, extra={"allow_private_endpoints": False})
    try:
        operator = registered(chain, "//GwPrivate")
        port = attacker.url.rsplit(":", 1)[1]
        for endpoint in (attacker.url, f"http://localhost:{port}", f"http://[::1]:{port}",
                         f"http://[::ffff:127.0.0.1]:{port}", "http://10.20.30.40:8101",
                         "http://192.168.0.9", "http://169.254.169.254/latest/meta-data"):
            refused = announce(strict, operator, endpoint)
            assert refused.status_code == 403, endpoint
            error = refused.json()["error"]
            assert error["code"] == "endpoint_not_allowed" and error["param"] == "endpoint"
            assert "allow_private_endpoints" in error["message"]
        time.sleep(SETTLE_S)
        assert strict.workers()["workers"] == []
        assert attacker.seen == []
    finally:
        strict.proc.stop()


def test_two_equally_loaded_workers_share_sequential_requests(tmp_path, chain, gateway, key):
    workers = [start_worker(tmp_path, chain, gateway.url, name=f"fair{i}",
                            dev_uri=f"//GwFair{i}", register_stake=2 * TOKEN,
                            extra={"models": ["fair-model"]}) for i in (1, 2)]
    try:
        for w in workers:
            transfer(chain, "//Alice", w.operator, 5 * TOKEN)
        wait_for(lambda: live_models(gateway).get("fair-model") == 2, 90, "both workers live")
        served = []
        for _ in range(40):
            response = chat(gateway, key, "fair-model")
            assert response.status_code == 200
            served.append(response.headers["x-net-operator"])
        for w in workers:
            assert served.count(w.operator) >= 10, served  # at least 25 % each
    finally:
        for w in workers:
            w.proc.stop()

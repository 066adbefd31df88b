"""The faucet against a real development node: drips land, concurrency is safe, limits hold,
bad input is refused with its field, and nothing is spent on a refusal."""

from __future__ import annotations

import concurrent.futures
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from substrateinterface.utils.ss58 import ss58_encode

from ops_tools.chain.rpc import RpcClient
from ops_tools.chainspec.hashing import blake2_256
from tests.services.faucet.conftest import (
    DRIP,
    FAUCET_KEY,
    Running,
    faucet_config,
    fresh,
    run_faucet,
)
from tests.support.devnode import DevNode, free_balance


@pytest.fixture(scope="module")
def faucet(funded_faucet: DevNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    tmp = tmp_path_factory.mktemp("faucet")
    with run_faucet(faucet_config(tmp, funded_faucet)) as running:
        yield running


def balance(node: DevNode, address: str) -> int:
    return free_balance(node.reader(), address)


def test_a_drip_raises_the_balance_and_its_block_holds_it(
    faucet: Running, funded_faucet: DevNode
) -> None:
    dest = fresh("one")
    resp = faucet.post({"recipient": dest})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["recipient"] == dest
    assert body["amount"] == {"plancks": str(DRIP), "tokens": "2", "symbol": "NET",
                              "decimals": 12}
    assert balance(funded_faucet, dest) == DRIP
    rpc = RpcClient(funded_faucet.http)
    assert body["genesis_hash"] == rpc.genesis_hash()
    block = rpc.call("chain_getBlock", [body["block_hash"]])
    assert int(block["block"]["header"]["number"], 16) == body["block_number"]
    hashes = ["0x" + blake2_256(bytes.fromhex(x[2:])).hex() for x in block["block"]["extrinsics"]]
    assert body["extrinsic_hash"] in hashes
    assert body["retry_after_s"] == 3600 and body["next_drip_at"].endswith("Z")


def test_fifty_concurrent_drips_to_fifty_accounts(faucet: Running, funded_faucet: DevNode) -> None:
    dests = [fresh(f"many-{i}") for i in range(50)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=50) as pool:
        answers = list(pool.map(lambda d: faucet.post({"recipient": d}), dests))
    assert [a.status_code for a in answers] == [200] * 50, [a.text for a in answers
                                                             if a.status_code != 200][:3]
    reader = funded_faucet.reader()
    assert [free_balance(reader, d) for d in dests] == [DRIP] * 50
    assert "nonce" not in faucet.log_text().lower()


def test_twenty_concurrent_requests_for_one_account_drip_once(
    faucet: Running, funded_faucet: DevNode
) -> None:
    dest = fresh("twenty")
    with concurrent.futures.ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(lambda _: faucet.post({"recipient": dest}), range(20)))
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] + [429] * 19, statuses
    for refused in (a for a in answers if a.status_code == 429):
        assert int(refused.headers["Retry-After"]) > 0
        assert refused.json()["error"]["code"] == "recipient_limit"
        assert "next drip is allowed" in refused.json()["error"]["message"]
    assert balance(funded_faucet, dest) == DRIP


def test_the_balance_cap_refuses_a_rich_account(faucet: Running, funded_faucet: DevNode) -> None:
    alice = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"
    before = balance(funded_faucet, alice)
    resp = faucet.post({"recipient": alice})
    assert resp.status_code == 403
    assert resp.json()["error"]["code"] == "balance_cap"
    assert balance(funded_faucet, alice) == before


BAD = [
    (b"recipient=5Grw", {"Content-Type": "application/x-www-form-urlencoded"}, 415,
     "unsupported_media_type", "application/json"),
    (b"{not json", {}, 400, "invalid_json", "JSON"),
    (json.dumps({"recipient": "5" * 2000}).encode(), {}, 413, "body_too_large", "bytes"),
    (b"[]", {}, 400, "invalid_body", "object"),
    (json.dumps({}).encode(), {}, 400, "invalid_field", "recipient"),
    (json.dumps({"recipient": fresh("x"), "amount": 5}).encode(), {}, 400, "unknown_field",
     "amount"),
    (json.dumps({"recipient": 42}).encode(), {}, 400, "invalid_field", "recipient"),
    (json.dumps({"recipient": "hello"}).encode(), {}, 400, "invalid_recipient", "recipient"),
    (json.dumps({"recipient": "0x" + "11" * 32}).encode(), {}, 400, "invalid_recipient", "hex"),
    (json.dumps({"recipient": ss58_encode(bytes(32), ss58_format=0)}).encode(), {}, 400,
     "invalid_recipient", "prefix 0"),
    (json.dumps({"recipient": FAUCET_KEY.ss58_address}).encode(), {}, 400,
     "invalid_recipient", "faucet's own"),
    (json.dumps({"recipient": fresh("k")}).encode(), {"Idempotency-Key": "has space"}, 400,
     "invalid_header", "Idempotency-Key"),
]


@pytest.mark.parametrize(("content", "headers", "status", "code", "needle"), BAD,
                         ids=[b[3] + "-" + str(i) for i, b in enumerate(BAD)])
def test_bad_input_is_refused_naming_the_problem(
    faucet: Running, funded_faucet: DevNode, content: bytes, headers: dict[str, str],
    status: int, code: str, needle: str,
) -> None:
    before = balance(funded_faucet, FAUCET_KEY.ss58_address)
    resp = httpx.post(faucet.url + "/drip-public", content=content,
                      headers={"Content-Type": "application/json", **headers}, timeout=30)
    assert resp.status_code == status, resp.text
    error = resp.json()["error"]
    assert error["code"] == code
    assert needle in error["message"]
    assert httpx.get(faucet.url + "/health").status_code == 200
    assert balance(funded_faucet, FAUCET_KEY.ss58_address) == before


def test_idempotency_key_returns_the_first_result(faucet: Running, funded_faucet: DevNode) -> None:
    dest = fresh("idem")
    first = faucet.post({"recipient": dest}, headers={"Idempotency-Key": "drip-idem-1"})
    again = faucet.post({"recipient": dest}, headers={"Idempotency-Key": "drip-idem-1"})
    assert first.status_code == again.status_code == 200, (first.text, again.text)
    assert again.json() == first.json()
    assert balance(funded_faucet, dest) == DRIP
    other = faucet.post({"recipient": fresh("idem-other")},
                        headers={"Idempotency-Key": "drip-idem-1"})
    assert other.status_code == 422 and "another recipient" in other.json()["error"]["message"]


def test_ndjson_streams_the_progress(faucet: Running, funded_faucet: DevNode) -> None:
    dest = fresh("stream")
    with httpx.stream("POST", faucet.url + "/drip-public", json={"recipient": dest},
                      headers={"Accept": "application/x-ndjson"}, timeout=180) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in resp.iter_lines() if line]
    assert [line.get("status") for line in lines[:3]] == ["submitted", "included", "finalized"]
    result = lines[3]
    assert result["recipient"] == dest and result["block_hash"] == lines[1]["block_hash"]
    assert lines[0]["extrinsic_hash"] == result["extrinsic_hash"]
    assert balance(funded_faucet, dest) == DRIP


def test_metrics_and_ready(faucet: Running) -> None:
    ready = httpx.get(faucet.url + "/ready")
    assert ready.status_code == 200, ready.text
    assert {c["name"] for c in ready.json()["checks"]} == {"database", "chain", "faucet_balance",
                                                          "signer_lease"}
    text = httpx.get(faucet.url + "/metrics").text
    assert 'faucet_requests_total{outcome="dripped"}' in text
    assert "faucet_balance_plancks" in text
    # The monitoring's drips left is the balance over this (FaucetFewDripsLeft).
    sizes = [float(line.split(" ")[1]) for line in text.splitlines()
             if line.startswith("faucet_drip_plancks ")]
    assert sizes == [float(DRIP)]
    assert "faucet_inclusion_seconds_bucket" in text
    assert httpx.get(faucet.url + "/openapi.json").json()["paths"]["/drip-public"]["post"]


def test_an_empty_faucet_is_not_ready_and_refuses_with_503(
    funded_faucet: DevNode, tmp_path: Path
) -> None:
    cfg = faucet_config(tmp_path, funded_faucet, seed="//FaucetNeverFunded")
    with run_faucet(cfg) as empty:
        ready = httpx.get(empty.url + "/ready")
        assert ready.status_code == 503 and "Retry-After" in ready.headers
        assert "less than one drip" in ready.json()["error"]["message"]
        resp = empty.post({"recipient": fresh("from-empty")})
        assert resp.status_code == 503
        assert resp.json()["error"]["code"] == "faucet_empty"
        assert "Retry-After" in resp.headers

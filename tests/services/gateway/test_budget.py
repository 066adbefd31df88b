"""Budgets hold under 50 concurrent requests of one key, with one gateway instance and with two
behind one nginx, on SQLite and on PostgreSQL: the reservation of the maximum cost is atomic in
the database, so no interleaving overspends."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from ops_tools.services.gateway import store
from ops_tools.services.gateway.database import open_database
from ops_tools.services.gateway.pricing import Price

from .conftest import TOKEN
from .harness import live_models, start_gateway, start_nginx, start_worker, transfer, wait_for

pytestmark = pytest.mark.timeout(300)

PRICE = Price(1_000_000, 2_000_000)  # net-test-chat in the harness's gateway configuration
MAX_TOKENS = 100
BODY = {"model": "net-test-chat", "messages": [{"role": "user", "content": "x"}],
        "max_tokens": MAX_TOKENS}
# What the gateway reserves (input bounded by bytes: "x" + "user" + 4 per message) and what the
# test engine's answer then costs (1 prompt token, exactly max_tokens output tokens).
MAX_COST = PRICE.cost(1 + 4 + 4, MAX_TOKENS)
ACTUAL_COST = PRICE.cost(1, MAX_TOKENS)
AFFORDABLE = 10
ALICE = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"


@pytest.fixture(scope="module")
def budget_operator(chain) -> str:
    from substrateinterface import Keypair

    address = Keypair.create_from_uri("//GwBudget", ss58_format=42).ss58_address
    transfer(chain, "//Alice", address, 5 * TOKEN)
    return "//GwBudget"


async def _fire(urls: list[str], key: str, n: int) -> list[httpx.Response]:
    limits = httpx.Limits(max_connections=n)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        return await asyncio.gather(*(
            client.post(urls[i % len(urls)] + "/v1/chat/completions", json=BODY,
                        headers={"Authorization": f"Bearer {key}"})
            for i in range(n)
        ))


@pytest.mark.parametrize("instances", [1, 2])
def test_no_overspend_under_50_concurrent_requests(
        tmp_path, chain, database_url, budget_operator, instances):
    assert MAX_COST > ACTUAL_COST > MAX_COST * AFFORDABLE / (AFFORDABLE + 1)
    gateways = [start_gateway(tmp_path / f"gw{i}", chain, database_url, name=f"gw{i}",
                              settle=False) for i in range(instances)]
    started = [g.proc for g in gateways]
    try:
        worker = start_worker(tmp_path / "worker", chain, gateways[0].url, name="budget",
                              dev_uri=budget_operator, register_stake=2 * TOKEN)
        started.append(worker.proc)
        for g in gateways:  # the second instance learns the worker from the shared database
            wait_for(lambda g=g: live_models(g).get("net-test-chat"), 90, f"{g.url} routes")
        urls = [g.url for g in gateways]
        if instances == 2:
            url, nginx = start_nginx(tmp_path / "nginx", urls)
            started.append(nginx)
            urls = [url]
        db = open_database(database_url, pool_size=2)
        key, key_id = store.create_key(db.engine, ALICE, budget=AFFORDABLE * MAX_COST, rpm=None,
                                       tpm=None)
        responses = asyncio.run(_fire(urls, key, 50))
        statuses = sorted(r.status_code for r in responses)
        ok = [r for r in responses if r.status_code == 200]
        refused = [r for r in responses if r.status_code == 429]
        others = [(r.status_code, r.text[:300]) for r in responses if r.status_code not in
                  (200, 429)]
        assert len(ok) + len(refused) == 50, (others, [g.workers() for g in gateways])
        # Spending ACTUAL_COST frees less than one more MAX_COST, so exactly AFFORDABLE pass.
        assert len(ok) == AFFORDABLE, statuses
        assert all(r.json()["error"]["code"] == "insufficient_quota" for r in refused)
        assert all(int(r.headers["retry-after"]) > 0 for r in refused)

        def settled() -> dict | None:
            row = next(k for k in store.list_keys(db.engine) if k["id"] == key_id)
            return row if row["reserved"] == 0 else None

        row = wait_for(settled, 30, "every reservation to settle")
        assert row["spent"] == AFFORDABLE * ACTUAL_COST <= row["budget"]
        usage = store.usage(db.engine, key)
        paid = [r for r in usage["receipts"] if r["status"] == "ok"]
        assert len(paid) == AFFORDABLE and sum(r["cost"] for r in paid) == row["spent"]
        db.dispose()
    finally:
        for proc in reversed(started):
            proc.stop()

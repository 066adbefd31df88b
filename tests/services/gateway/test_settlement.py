"""Settlement: the operator's on-chain balance rises by what its receipts say, in one signed
transfer from the settlement account per operator, and the receipts name the extrinsic."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import func, select
from substrateinterface import Keypair, SubstrateInterface

from ops_tools.services.gateway.schema import receipts as receipts_table

from .conftest import make_key
from .harness import wait_for

pytestmark = pytest.mark.timeout(300)
SETTLEMENT = Keypair.create_from_uri("//Ferdie", ss58_format=42).ss58_address


def _free_at(substrate: SubstrateInterface, address: str, block_hash: str) -> int:
    return int(substrate.query("System", "Account", [address],
                               block_hash=block_hash).value["data"]["free"])


def test_receipts_settle_on_chain(chain, gateway, worker, engine):
    key = make_key(engine)
    headers = {"Authorization": f"Bearer {key}"}
    for i in range(3):
        response = httpx.post(gateway.url + "/v1/chat/completions", headers=headers, json={
            "model": "net-test-chat", "max_tokens": 5 + i,
            "messages": [{"role": "user", "content": "settle me"}]})
        assert response.status_code == 200

    def settled() -> list[dict] | None:
        receipts = httpx.get(gateway.url + "/v1/usage", headers=headers).json()["receipts"]
        return receipts if all(r["settle_status"] == "settled" for r in receipts) else None

    receipts = wait_for(settled, 60, "the receipts to settle")
    assert len(receipts) == 3 and all(r["operator"] == worker.operator for r in receipts)
    by_extrinsic: dict[tuple[str, int], int] = {}
    for r in receipts:
        assert r["settled_extrinsic"].startswith("0x") and r["settled_block"] > 0
        key_ = (r["settled_extrinsic"], r["settled_block"])
        by_extrinsic[key_] = by_extrinsic.get(key_, 0) + r["cost"]
    substrate = SubstrateInterface(url=chain.http, ss58_format=42)
    try:
        for (extrinsic, number), _ in by_extrinsic.items():
            block_hash = substrate.get_block_hash(number)
            parent = substrate.get_block_header(block_hash)["header"]["parentHash"]
            events = [e.value for e in substrate.get_events(block_hash)]
            transfers = [e["attributes"] for e in events
                         if (e["module_id"], e["event_id"]) == ("Balances", "Transfer")
                         and e["attributes"]["to"] == worker.operator]
            assert len(transfers) == 1 and transfers[0]["from"] == SETTLEMENT
            amount = int(transfers[0]["amount"])
            with engine.connect() as conn:  # every key's receipts this transfer paid
                paid = conn.execute(
                    select(func.sum(receipts_table.c.cost))
                    .where(receipts_table.c.settled_extrinsic == extrinsic)).scalar_one()
            assert amount == paid >= by_extrinsic[(extrinsic, number)]
            fees = sum(int(e["attributes"]["actual_fee"]) for e in events
                       if e["event_id"] == "TransactionFeePaid"
                       and e["attributes"]["who"] == worker.operator)
            rise = (_free_at(substrate, worker.operator, block_hash)
                    - _free_at(substrate, worker.operator, parent))
            assert rise == amount - fees
            block = substrate.get_block(block_hash)
            hashes = [x.value["extrinsic_hash"] for x in block["extrinsics"]]
            assert extrinsic in hashes
    finally:
        substrate.close()

"""``ops-tools operator status``: registration, stake, heartbeats, gateway liveness, earnings.

Earnings settled are the ``Balances.Transfer`` events into the account that the indexer has
seen, except the faucet's drips: the gateway settles what a worker earned with one transfer
per settlement run (docs/gateway.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from ops_tools.errors import OpsError
from ops_tools.operator import gateway_client
from ops_tools.operator.report import heartbeat_state
from ops_tools.wallet import operator, rpc
from ops_tools.wallet.keystore import Keystore

_TRANSFERS = """query($to: String!, $after: String) {
  transfers(to: $to, first: 100, after: $after) {
    edges { node { from amount blockNumber } }
    pageInfo { hasNextPage endCursor }
  }
}"""


def _json(method: str, url: str, **kwargs: Any) -> Any:
    response = httpx.request(method, url, timeout=10, **kwargs)
    response.raise_for_status()
    return response.json()


def earnings(indexer_url: str, faucet_url: str | None, account: str) -> dict[str, Any]:
    faucet = None
    if faucet_url:
        try:
            faucet = _json("GET", f"{faucet_url}/info").get("address")
        except (httpx.HTTPError, ValueError):
            faucet = None
    total, count, after = 0, 0, None
    while True:
        body = _json("POST", f"{indexer_url}/graphql",
                     json={"query": _TRANSFERS, "variables": {"to": account, "after": after}})
        if body.get("errors"):
            raise OpsError(f"indexer {indexer_url}: {body['errors'][0].get('message')}")
        page = body["data"]["transfers"]
        for edge in page["edges"]:
            node = edge["node"]
            if node["from"] != faucet:
                total, count = total + int(node["amount"]), count + 1
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    return {"plancks": str(total), "transfers": count, "excluded_faucet": faucet}


def status(name: str, keystore_dir: Any, rpc_url: str, gateway_url: str, indexer_url: str | None,
           faucet_url: str | None, passphrase: Callable[[], str], timeout: float = 60,
           ) -> dict[str, Any]:
    """``passphrase`` is asked only for the gateway's view, which the operator's key signs."""
    keystore = Keystore(keystore_dir)
    address = keystore.info(name).ss58_address
    substrate = rpc.connect(rpc_url, timeout)
    try:
        record = operator.operator_record(substrate, address)
        epoch = operator.current_epoch(substrate)
        balance = operator.read_balance(substrate, address)
        genesis = operator.genesis_hash(substrate)
    finally:
        substrate.close()
    last = int(record["last_heartbeat_epoch"]) if record else None
    out: dict[str, Any] = {
        "name": name, "account": address, "genesis_hash": genesis,
        "registered": bool(record),
        "stake": str(record["stake"]) if record else None,
        "registered_at": record.get("registered_at") if record else None,
        "attestation_hash": record.get("attestation_hash") if record else None,
        "current_epoch": epoch, "last_heartbeat_epoch": last,
        "heartbeat": heartbeat_state(last, epoch) if record else "not registered",
        "balance": balance.to_json(),
    }
    try:
        keypair = keystore.unlock_hotkey(name, passphrase())
        out["gateway_view"] = gateway_client.worker_view(gateway_url, keypair, genesis)
    except OpsError as exc:
        out["gateway_view"], out["gateway_error"] = None, str(exc)
    out["worker_live"] = bool(out["gateway_view"] and out["gateway_view"].get("live"))
    if indexer_url:
        try:
            out["earnings_settled"] = earnings(indexer_url, faucet_url, address)
        except (OpsError, httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            out["earnings_settled"] = None
            out["earnings_error"] = f"indexer {indexer_url}: {exc}"
    return out

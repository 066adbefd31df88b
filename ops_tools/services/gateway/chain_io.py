"""The gateway's chain reads (epoch, MinStake, registrations) and settlement transfers.

Blocking (substrate-interface); the service calls them in a worker thread.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from substrateinterface import Keypair, SubstrateInterface

from ops_tools.chain.rpc import http_url
from ops_tools.services.gateway.router import ChainView

PALLET = "OperatorStake"


def _ws_url(url: str) -> str:
    if url.startswith("http://"):
        return "ws://" + url[len("http://"):]
    if url.startswith("https://"):
        return "wss://" + url[len("https://"):]
    return url


class ChainReader:
    """Reads over HTTP: no WebSocket to go stale between polls."""

    def __init__(self, rpc_url: str) -> None:
        self.url = http_url(rpc_url)
        self._substrate: SubstrateInterface | None = None

    def _connect(self) -> SubstrateInterface:
        if self._substrate is None:
            self._substrate = SubstrateInterface(url=self.url, ss58_format=42)
        return self._substrate

    def genesis_hash(self) -> str:
        return str(self._connect().get_block_hash(0)).lower()

    def read(self, operators: Iterable[str]) -> ChainView:
        try:
            substrate = self._connect()
            epoch = int(substrate.query(PALLET, "CurrentEpoch").value)
            min_stake = int(substrate.get_constant(PALLET, "MinStake").value)
            stakes: dict[str, int] = {}
            for operator in set(operators):
                record = substrate.query(PALLET, "Operators", [operator]).value
                if record:
                    stakes[operator] = int(record["stake"])
        except Exception:
            self._substrate = None  # reconnect (and reload metadata) next time
            raise
        return ChainView(current_epoch=epoch, min_stake=min_stake, stakes=stakes)


@dataclass(frozen=True)
class Transfer:
    extrinsic_hash: str
    block_hash: str
    block_number: int


def settlement_keypair(secret: str) -> Keypair:
    secret = secret.strip()
    if secret.startswith("0x") and len(secret) == 66:
        return Keypair.create_from_seed(secret, ss58_format=42)
    if secret.startswith("//") or secret.startswith("/"):
        return Keypair.create_from_uri(secret, ss58_format=42)
    return Keypair.create_from_mnemonic(secret, ss58_format=42)


def transfer(rpc_url: str, keypair: Keypair, dest: str, amount: int) -> Transfer:
    """One signed ``Balances.transfer_keep_alive``, waited into a block; raises on failure."""
    substrate = SubstrateInterface(url=_ws_url(rpc_url), ss58_format=42)
    try:
        call = substrate.compose_call(
            "Balances", "transfer_keep_alive", {"dest": dest, "value": amount}
        )
        extrinsic = substrate.create_signed_extrinsic(call=call, keypair=keypair)
        receipt = substrate.submit_extrinsic(extrinsic, wait_for_inclusion=True)
        if not receipt.is_success:
            raise RuntimeError(f"transfer to {dest} failed: {receipt.error_message}")
        block_hash = str(receipt.block_hash)
        return Transfer(
            extrinsic_hash=str(receipt.extrinsic_hash),
            block_hash=block_hash,
            block_number=int(substrate.get_block_number(block_hash)),
        )
    finally:
        substrate.close()

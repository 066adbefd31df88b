"""The gateway's chain reads (epoch, MinStake, registrations) and settlement transfers.

Blocking (substrate-interface); the service calls them in a worker thread.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from scalecodec.base import ScaleBytes
from substrateinterface import Keypair, SubstrateInterface
from substrateinterface.storage import StorageKey

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
    """Reads over HTTP: no WebSocket to go stale between polls.

    One poll is one ``state_queryStorageAt`` of the epoch and every known operator's record at
    the best block, decoded with the metadata loaded at connect time (substrate-interface's
    ``query`` would re-read the head, header and runtime version for every entry: a dozen round
    trips and their decoding a poll, on a thread that shares the interpreter with the request
    path). The connection, and so the metadata and MinStake, is renewed every
    ``RENEW_S`` seconds and after any failure, which picks up a runtime upgrade.
    """

    RENEW_S = 60.0

    def __init__(self, rpc_url: str) -> None:
        self.url = http_url(rpc_url)
        self._substrate: SubstrateInterface | None = None
        self._connected_at = 0.0
        self._min_stake = 0
        self._keys: dict[str, StorageKey] = {}

    def _connect(self) -> SubstrateInterface:
        now = time.monotonic()
        if self._substrate is None or now - self._connected_at > self.RENEW_S:
            substrate = SubstrateInterface(url=self.url, ss58_format=42)
            substrate.init_runtime()
            self._min_stake = int(substrate.get_constant(PALLET, "MinStake").value)
            self._keys = {"": substrate.create_storage_key(PALLET, "CurrentEpoch")}
            self._substrate, self._connected_at = substrate, now
        return self._substrate

    def genesis_hash(self) -> str:
        return str(self._connect().get_block_hash(0)).lower()

    def read(self, operators: Iterable[str]) -> ChainView:
        try:
            substrate = self._connect()
            for operator in set(operators) - self._keys.keys():
                self._keys[operator] = substrate.create_storage_key(PALLET, "Operators",
                                                                    [operator])
            wanted = ["", *sorted(set(operators))]
            by_hex = {self._keys[name].to_hex(): name for name in wanted}
            response = substrate.rpc_request(
                "state_queryStorageAt", [[self._keys[name].to_hex() for name in wanted], None])
            values: dict[str, Any] = {}
            for group in response["result"]:
                for key_hex, data in group["changes"]:
                    name = by_hex[key_hex]
                    values[name] = self._keys[name].decode_scale_value(
                        ScaleBytes(data) if data is not None else None).value
        except Exception:
            self._substrate = None  # reconnect (and reload metadata) next time
            raise
        stakes = {op: int(record["stake"]) for op, record in values.items()
                  if op and record}
        return ChainView(current_epoch=int(values[""]), min_stake=self._min_stake,
                         stakes=stakes)


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

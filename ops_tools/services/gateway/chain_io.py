"""The gateway's chain reads (epoch, MinStake, registrations) and settlement transfers.

Blocking (substrate-interface over HTTP); the service calls them in a worker thread. Every RPC
call has a timeout (connect and read): a node that accepts and never answers fails the call
instead of holding the thread, and the caller's view of the chain expires.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from scalecodec.base import ScaleBytes
from substrateinterface import Keypair, SubstrateInterface
from substrateinterface.storage import StorageKey

from ops_tools.chain import substrate as chain_substrate
from ops_tools.chain.urls import http_url
from ops_tools.services.gateway.router import ChainView

PALLET = "OperatorStake"


def connect(rpc_url: str, timeout_s: float) -> SubstrateInterface:
    """substrate-interface over HTTP, every call bounded by ``timeout_s`` (connect and read),
    addresses in the chain's own ss58 format (its ``system_properties``)."""
    return chain_substrate.connect(http_url(rpc_url), timeout_s)


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

    def __init__(self, rpc_url: str, timeout_s: float) -> None:
        self.url = http_url(rpc_url)
        self.timeout_s = timeout_s
        self._substrate: SubstrateInterface | None = None
        self._connected_at = 0.0
        self._min_stake = 0
        self._keys: dict[str, StorageKey] = {}

    def _connect(self) -> SubstrateInterface:
        now = time.monotonic()
        if self._substrate is None or now - self._connected_at > self.RENEW_S:
            substrate = connect(self.url, self.timeout_s)
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
class Signed:
    """A signed transfer, not yet sent: what is recorded before it is."""

    data: str  # the encoded extrinsic, 0x hex
    extrinsic_hash: str
    nonce: int
    era_birth: int  # the best block when it was signed: it cannot be in a block before
    era_period: int


@dataclass(frozen=True)
class Outcome:
    """What the chain says about a recorded transfer. ``final`` False: not (yet) in a block and
    still valid, so it may yet be; ``included`` False with ``final``: it never will be."""

    final: bool
    included: bool = False
    success: bool = False
    block_hash: str | None = None
    block_number: int | None = None
    error: str | None = None


def _extrinsic_hash(data_hex: str) -> str:
    return "0x" + hashlib.blake2b(bytes.fromhex(data_hex.removeprefix("0x")),
                                  digest_size=32).hexdigest()


class Settler:
    """Settlement transfers that pay exactly once: signed mortal with an explicit nonce and
    recorded (``sign``) before they are sent (``send``); whether one paid is read from the
    chain (``outcome``), never assumed from a lost answer."""

    def __init__(self, rpc_url: str, keypair: Keypair, timeout_s: float, era_period: int) -> None:
        self.rpc_url, self.keypair = rpc_url, keypair
        self.timeout_s, self.era_period = timeout_s, era_period

    def sign(self, dest: str, amount: int) -> Signed:
        substrate = connect(self.rpc_url, self.timeout_s)
        try:
            nonce = int(substrate.rpc_request(
                "system_accountNextIndex",
                [substrate.ss58_encode(self.keypair.public_key)])["result"])
            birth = int(substrate.get_block_number(substrate.get_chain_head()))
            call = substrate.compose_call("Balances", "transfer_keep_alive",
                                          {"dest": dest, "value": amount})
            extrinsic = substrate.create_signed_extrinsic(
                call=call, keypair=self.keypair, nonce=nonce,
                era={"period": self.era_period, "current": birth})
            data = str(extrinsic.data)
            return Signed(data, _extrinsic_hash(data), nonce, birth, self.era_period)
        finally:
            substrate.close()

    def send(self, signed: Signed) -> None:
        """Raises when the answer is an error or lost. Either way only ``outcome`` decides: an
        error can also mean it is in the pool already (a resubmission), and a lost answer says
        nothing."""
        substrate = connect(self.rpc_url, self.timeout_s)
        try:
            substrate.rpc_request("author_submitExtrinsic", [signed.data])
        finally:
            substrate.close()

    def outcome(self, extrinsic_hash: str, era_birth: int, era_period: int) -> Outcome:
        """Look for the transfer in the blocks where it can be (after its birth, within its
        era); absent once the best block is past the era, it never will be."""
        substrate = connect(self.rpc_url, self.timeout_s)
        try:
            head = int(substrate.get_block_number(substrate.get_chain_head()))
            last = min(head, era_birth + era_period)
            for number in range(era_birth + 1, last + 1):
                block_hash = substrate.rpc_request("chain_getBlockHash", [number])["result"]
                block = substrate.rpc_request("chain_getBlock", [block_hash])["result"]
                hashes = [_extrinsic_hash(x) for x in block["block"]["extrinsics"]]
                if extrinsic_hash in hashes:
                    return self._included(substrate, block_hash, number,
                                          hashes.index(extrinsic_hash))
            return Outcome(final=head > era_birth + era_period)
        finally:
            substrate.close()

    @staticmethod
    def _included(substrate: SubstrateInterface, block_hash: str, number: int,
                  index: int) -> Outcome:
        for event in substrate.get_events(block_hash):
            doc = event.value
            if doc.get("extrinsic_idx") != index or doc["module_id"] != "System":
                continue
            if doc["event_id"] == "ExtrinsicSuccess":
                return Outcome(True, True, True, block_hash, number)
            if doc["event_id"] == "ExtrinsicFailed":
                return Outcome(True, True, False, block_hash, number,
                               f"the transfer failed in block #{number}: {doc['attributes']}")
        raise RuntimeError(f"block #{number} holds the transfer but no outcome event for it")

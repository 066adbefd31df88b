"""The faucet's one signer: transfers from its account, in nonce order, followed to finality.

Submission (nonce, sign, ``author_submitExtrinsic``) runs under one lock, so drips of concurrent
requests get consecutive nonces; waiting is not under the lock, so many drips are in flight at
once. A follower thread reads each new best block once, matches the extrinsic hashes of the
pending drips and resolves their tickets (included, then finalized). Everything goes over HTTP
JSON-RPC: no long-lived WebSocket to go stale between requests.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from substrateinterface import Keypair, SubstrateInterface
from substrateinterface.exceptions import SubstrateRequestException

from ops_tools.chain.rpc import RpcClient, RpcError, http_url
from ops_tools.chainspec.hashing import blake2_256
from ops_tools.services.faucet.nonce import NonceManager

log = logging.getLogger("net.faucet.signer")

# Pool answers that mean "your nonce is wrong": re-read it from the chain and try once more.
_NONCE_ERRORS = ("Priority is too low", "Transaction is outdated", "Stale", "outdated")


class PinnedSubstrate(SubstrateInterface):
    """substrate-interface asks the node for the head, its header and its runtime version
    before every compose, sign and query (eight round trips per transfer, under the signer's
    lock). The faucet pins the runtime it loaded instead; the signer drops the client (and so
    the pin) after any refusal or transport error, so a runtime upgrade costs one refused
    request and the next one loads the new metadata."""

    _pinned = False
    _genesis: str | None = None

    def init_runtime(self, block_hash: str | None = None, block_id: int | None = None) -> Any:
        if self._pinned and block_hash is None and block_id is None:
            return None
        result = super().init_runtime(block_hash=block_hash, block_id=block_id)
        self._pinned = True
        return result

    def get_block_hash(self, block_id: int | None = None) -> str:
        if block_id == 0:
            if self._genesis is None:
                self._genesis = super().get_block_hash(0)
            return self._genesis
        return super().get_block_hash(block_id)


class SignerError(Exception):
    """The drip did not happen (``spent`` False) or its fate is unknown (``spent`` None)."""

    def __init__(self, code: str, message: str, *, spent: bool | None = False) -> None:
        super().__init__(message)
        self.code = code
        self.spent = spent


class ChainUnavailable(SignerError):
    def __init__(self, message: str) -> None:
        super().__init__("chain_unavailable", message, spent=False)


@dataclass
class Ticket:
    """One transfer in flight; the follower thread fills it, the request waits on it."""

    extrinsic_hash: str
    submitted_at: float
    block_hash: str | None = None
    block_number: int | None = None
    included_at: float | None = None
    finalized: bool = False
    failure: str | None = None
    _cond: threading.Condition = field(default_factory=threading.Condition, repr=False)

    def _update(self, **changes: Any) -> None:
        with self._cond:
            for key, value in changes.items():
                setattr(self, key, value)
            self._cond.notify_all()

    def wait(self, predicate: Callable[[Ticket], bool], timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self) or self.failure is not None,
                                       timeout=timeout)

    def wait_included(self, timeout: float) -> bool:
        return self.wait(lambda t: t.block_hash is not None, timeout) and self.failure is None

    def wait_finalized(self, timeout: float) -> bool:
        return self.wait(lambda t: t.finalized, timeout) and self.failure is None


class Signer:
    def __init__(
        self,
        rpc_url: str,
        keypair: Keypair,
        *,
        ss58_format: int = 42,
        poll_interval_s: float = 0.2,
        timeout_s: float = 10.0,
    ) -> None:
        self.url = http_url(rpc_url)
        self.keypair = keypair
        self.address = keypair.ss58_address
        self._ss58 = ss58_format
        self._timeout = timeout_s
        self._poll = poll_interval_s
        self._submit_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._pending: dict[str, Ticket] = {}
        self._in_block: dict[str, Ticket] = {}
        self._pending_lock = threading.Lock()
        self._rescan_from: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._rpc = RpcClient(self.url, timeout=timeout_s)
        self.nonces = NonceManager(self._chain_nonce)
        self._submitter: SubstrateInterface | None = None
        self._reader: SubstrateInterface | None = None

    # --- life cycle -------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._follow, name="faucet-follower",
                                            daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for client in (self._submitter, self._reader):
            if client is not None:
                with contextlib.suppress(Exception):
                    client.close()

    def _client(self, attr: str) -> SubstrateInterface:
        client = getattr(self, attr)
        if client is None:
            try:
                client = PinnedSubstrate(url=self.url, ss58_format=self._ss58)
                client.init_runtime()
            except Exception as exc:
                raise ChainUnavailable(f"the chain RPC {self.url} is unreachable ({exc})") from exc
            setattr(self, attr, client)
        return client

    # --- reads --------------------------------------------------------------------------------

    def _chain_nonce(self) -> int:
        try:
            return int(self._rpc.call("system_accountNextIndex", [self.address]))
        except RpcError as exc:
            raise ChainUnavailable(str(exc)) from exc

    def free_balance(self, address: str) -> int:
        with self._read_lock:
            try:
                info = self._client("_reader").query("System", "Account", [address]).value
            except SubstrateRequestException as exc:
                raise ChainUnavailable(f"reading the balance of {address} failed: {exc}") from exc
            except Exception as exc:
                self._reader = None  # a fresh client next time (metadata, connection)
                raise ChainUnavailable(f"the chain RPC {self.url} is unreachable ({exc})") from exc
        return int(info["data"]["free"])

    def balance(self) -> int:
        return self.free_balance(self.address)

    # --- submission -----------------------------------------------------------------------

    def transfer(self, dest: str, amount: int) -> Ticket:
        """Submit ``amount`` plancks to ``dest``; the ticket resolves as blocks arrive.

        ``SignerError`` with ``spent=False`` when nothing reached the pool.
        """
        self.start()
        with self._submit_lock:
            for attempt in (1, 2):
                try:
                    return self._submit_once(dest, amount)
                except SignerError as exc:
                    self.nonces.invalidate()
                    if attempt == 2 or exc.code != "nonce":
                        raise
                    log.warning("nonce refused by the pool, re-read from the chain: %s", exc)
        raise AssertionError("unreachable")

    def _submit_once(self, dest: str, amount: int) -> Ticket:
        substrate = self._client("_submitter")
        try:
            call = substrate.compose_call(
                "Balances", "transfer_keep_alive", {"dest": dest, "value": amount}
            )
            nonce = self.nonces.take()
            xt = substrate.create_signed_extrinsic(call=call, keypair=self.keypair, nonce=nonce)
        except SignerError:
            raise
        except Exception as exc:
            self._submitter = None
            raise ChainUnavailable(f"the chain RPC {self.url} is unreachable ({exc})") from exc
        xt_hash = "0x" + xt.extrinsic_hash.hex()
        ticket = Ticket(extrinsic_hash=xt_hash, submitted_at=time.monotonic())
        with self._pending_lock:  # registered before submission: the follower cannot miss it
            self._pending[xt_hash] = ticket
        try:
            answer = substrate.rpc_request("author_submitExtrinsic", [str(xt.data)])
        except SubstrateRequestException as exc:
            self._forget(xt_hash)
            error = exc.args[0] if exc.args else {}
            text = (
                f"{error.get('message', '')}: {error.get('data', '')}".strip(": ")
                if isinstance(error, dict) else str(error)
            )
            self._submitter = None  # reload the runtime next time: it may have been upgraded
            if any(marker in text for marker in _NONCE_ERRORS):
                raise SignerError("nonce", text) from exc
            raise SignerError("pool_rejected", f"the node refused the transfer: {text}") from exc
        except Exception as exc:
            self._forget(xt_hash)
            self._submitter = None
            raise ChainUnavailable(f"the chain RPC {self.url} is unreachable ({exc})") from exc
        answer = answer.get("result") if isinstance(answer, dict) else answer
        if isinstance(answer, str) and answer.lower() != xt_hash:
            log.warning("node reports extrinsic hash %s, computed %s", answer, xt_hash)
        return ticket

    # --- the follower -------------------------------------------------------------------------

    def _follow(self) -> None:
        last = None
        failing = False
        while not self._stop.is_set():
            try:
                last = self._follow_once(last)
                if failing:
                    log.info("block follower: the chain answers again")
                failing = False
            except Exception as exc:  # the node restarts or drops a request: try again
                # Once per outage, not once per poll: a reset takes the chain away for seconds.
                if not failing:
                    log.warning("block follower: %s; retrying", exc)
                failing = True
            self._stop.wait(self._poll)

    def _forget(self, xt_hash: str) -> None:
        with self._pending_lock:
            self._pending.pop(xt_hash, None)

    def _follow_once(self, last: int | None) -> int:
        # Best first, pending second: a drip registered after this read lands in a later block.
        best = int(self._rpc.call("chain_getHeader")["number"], 16)
        with self._pending_lock:
            waiting = bool(self._pending)
            watching = bool(self._in_block)
            rescan, self._rescan_from = self._rescan_from, None
        if last is None or not waiting:
            last = best
        else:
            if rescan is not None:
                last = min(last, rescan - 1)
            for number in range(last + 1, best + 1):
                self._scan(number)
                last = number
        if watching:
            self._check_finality()
        return last

    def _scan(self, number: int) -> None:
        block_hash = self._rpc.call("chain_getBlockHash", [number])
        block = self._rpc.call("chain_getBlock", [block_hash])
        found: list[tuple[int, Ticket]] = []
        with self._pending_lock:
            for index, hex_xt in enumerate(block["block"]["extrinsics"]):
                xt_hash = "0x" + blake2_256(bytes.fromhex(hex_xt[2:])).hex()
                ticket = self._pending.pop(xt_hash, None)
                if ticket is not None:
                    found.append((index, ticket))
        if not found:
            return
        failures = self._failures(block_hash)
        now = time.monotonic()
        for index, ticket in found:
            if index in failures:
                ticket._update(failure=failures[index], block_hash=block_hash,
                               block_number=number, included_at=now)
                continue
            ticket._update(block_hash=block_hash, block_number=number, included_at=now)
            with self._pending_lock:
                self._in_block[ticket.extrinsic_hash] = ticket

    def _failures(self, block_hash: str) -> dict[int, str]:
        """Extrinsic index -> dispatch error, from the block's ``System.Events``."""
        with self._read_lock:
            events = self._client("_reader").get_events(block_hash)
        out: dict[int, str] = {}
        for record in events:
            value = record.value
            if (value["module_id"], value["event_id"]) != ("System", "ExtrinsicFailed"):
                continue
            index = value.get("extrinsic_idx")
            if index is not None:
                out[int(index)] = str(value["attributes"].get("dispatch_error"))
        return out

    def _check_finality(self) -> None:
        head = self._rpc.call("chain_getFinalizedHead")
        finalized = int(self._rpc.call("chain_getHeader", [head])["number"], 16)
        with self._pending_lock:
            ready = [t for t in self._in_block.values()
                     if t.block_number is not None and t.block_number <= finalized]
        for ticket in ready:
            canonical = self._rpc.call("chain_getBlockHash", [ticket.block_number])
            with self._pending_lock:
                self._in_block.pop(ticket.extrinsic_hash, None)
                if canonical != ticket.block_hash:
                    # Its block lost a fork; the transfer is back in the pool (or gone): follow
                    # it again from the fork point.
                    self._pending[ticket.extrinsic_hash] = ticket
                    self._rescan_from = min(self._rescan_from or ticket.block_number,
                                            ticket.block_number)
                    ticket._update(block_hash=None, block_number=None, included_at=None)
                    continue
            ticket._update(finalized=True)

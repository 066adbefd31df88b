"""The faucet's one signer: transfers from its account, in nonce order, followed to finality.

Submission (nonce, sign, ``author_submitExtrinsic``) runs under one lock, so drips of concurrent
requests get consecutive nonces; waiting is not under the lock, so many drips are in flight at
once. A follower thread reads each new best block once, matches the extrinsic hashes of the
pending drips and resolves their tickets (included, then finalized). Everything goes over HTTP
JSON-RPC, every request with a timeout: no long-lived WebSocket to go stale between requests, and
a node that hangs makes a request fail instead of holding it.

A submission whose answer is lost (a transport error after ``author_submitExtrinsic`` was sent)
has an unknown outcome: its ticket stays followed and the chain decides. The follower finds it in
a block, or sees the account's nonce move past it without it (another transaction took the
nonce: it can never be applied, ``dropped``), or, while neither, sends the *same signed bytes*
again (same hash, same nonce: the node keeps at most one, so this can never pay twice). A ticket
that resolves in none of these ways within ``ticket_ttl_s`` expires and is no longer followed.
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

from ops_tools.chain import substrate as chain_substrate
from ops_tools.chain.rpc import RpcClient, RpcError
from ops_tools.chain.urls import http_url
from ops_tools.chainspec.hashing import blake2_256
from ops_tools.services.faucet.nonce import NonceManager

log = logging.getLogger("net.faucet.signer")

# Pool answers that mean "your nonce is wrong": re-read it from the chain and try once more.
_NONCE_ERRORS = ("Priority is too low", "Transaction is outdated", "Stale", "outdated")
# The node's answer to an extrinsic it already holds (JSON-RPC error 1013).
_ALREADY_IMPORTED = ("1013", "Already Imported")
# A submission with a lost answer is sent again (same bytes) this long after the last attempt.
RESEND_AFTER_S = 2.0
# How often the follower reads the best block while it follows nothing: only to keep the
# journal's rescan start near the head. A transfer wakes it at once, so no drip waits for this.
IDLE_FOLLOW_S = 2.0


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


@dataclass(frozen=True)
class Signed:
    """A signed transfer before it is sent: what the journal records first."""

    extrinsic_hash: str
    nonce: int
    from_block: int


@dataclass
class Ticket:
    """One transfer in flight; the follower thread fills it, the request waits on it.

    Resolved when it is in a block (``block_hash``, maybe with a dispatch ``failure``),
    ``dropped`` (its nonce was used by another transaction: it will never apply) or ``expired``
    (followed for ``ticket_ttl_s`` without an answer: its fate is unknown).
    """

    extrinsic_hash: str
    submitted_at: float
    nonce: int = -1
    data: str = ""
    expires_at: float = float("inf")
    # The answer to the submission was lost: the follower sends the same bytes again.
    uncertain: bool = False
    last_sent: float = 0.0
    block_hash: str | None = None
    block_number: int | None = None
    included_at: float | None = None
    finalized: bool = False
    failure: str | None = None
    dropped: bool = False
    expired: bool = False
    _cond: threading.Condition = field(default_factory=threading.Condition, repr=False)

    @property
    def resolved(self) -> bool:
        return (self.block_hash is not None or self.failure is not None or self.dropped
                or self.expired)

    def _update(self, **changes: Any) -> None:
        with self._cond:
            for key, value in changes.items():
                setattr(self, key, value)
            self._cond.notify_all()

    def wait(self, predicate: Callable[[Ticket], bool], timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(
                lambda: predicate(self) or self.failure is not None or self.dropped
                or self.expired, timeout=timeout)

    def wait_included(self, timeout: float) -> bool:
        return self.wait(lambda t: t.block_hash is not None, timeout) and self._applied()

    def wait_finalized(self, timeout: float) -> bool:
        return self.wait(lambda t: t.finalized, timeout) and self._applied()

    def _applied(self) -> bool:
        return self.block_hash is not None and self.failure is None


class Signer:
    def __init__(
        self,
        rpc_url: str,
        keypair: Keypair,
        *,
        ss58_format: int = 42,
        poll_interval_s: float = 0.2,
        timeout_s: float = 10.0,
        ticket_ttl_s: float = 900.0,
        on_resolved: Callable[[Ticket], None] | None = None,
    ) -> None:
        self.url = http_url(rpc_url)
        self.keypair = keypair
        self.address = keypair.ss58_address
        self._ss58 = ss58_format
        self._timeout = timeout_s
        self._poll = poll_interval_s
        self._ttl = ticket_ttl_s
        self._on_resolved = on_resolved or (lambda _t: None)
        self._submit_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._pending: dict[str, Ticket] = {}
        self._in_block: dict[str, Ticket] = {}
        self._pending_lock = threading.Lock()
        self._rescan_from: int | None = None
        self._best_seen: int | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()  # a ticket to follow: the follower looks at once
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
        self._wake.set()
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
                # Every call bounded: a node that hangs would otherwise hold the signer's lock
                # (and every drip behind it) until it answers again.
                client = chain_substrate.connect(self.url, self._timeout,
                                                 ss58_format=self._ss58, cls=PinnedSubstrate)
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

    def _account(self, address: str, block_hash: str | None = None) -> dict[str, Any]:
        with self._read_lock:
            try:
                return self._client("_reader").query(  # type: ignore[no-any-return]
                    "System", "Account", [address], block_hash=block_hash).value
            except SubstrateRequestException as exc:
                raise ChainUnavailable(f"reading the account {address} failed: {exc}") from exc
            except Exception as exc:
                self._reader = None  # a fresh client next time (metadata, connection)
                raise ChainUnavailable(f"the chain RPC {self.url} is unreachable ({exc})") from exc

    def free_balance(self, address: str) -> int:
        return int(self._account(address)["data"]["free"])

    def balance(self) -> int:
        return self.free_balance(self.address)

    # --- submission -----------------------------------------------------------------------

    def transfer(self, dest: str, amount: int,
                 journal: Callable[[Signed], None] | None = None) -> Ticket:
        """Submit ``amount`` plancks to ``dest``; the ticket resolves as blocks arrive.

        ``journal`` records the signed transfer before it is sent (what was attempted); when it
        raises, nothing is sent. ``SignerError`` (``spent=False``) when nothing reached the
        pool; a transport error after sending is no error: the ticket comes back ``uncertain``
        and the follower reconciles it against the chain.
        """
        self.start()
        with self._submit_lock:
            for attempt in (1, 2):
                try:
                    return self._submit_once(dest, amount, journal)
                except SignerError as exc:
                    self.nonces.invalidate()
                    if attempt == 2 or exc.code != "nonce":
                        raise
                    log.warning("nonce refused by the pool, re-read from the chain: %s", exc)
        raise AssertionError("unreachable")

    def _submit_once(self, dest: str, amount: int,
                     journal: Callable[[Signed], None] | None) -> Ticket:
        substrate = self._client("_submitter")
        try:
            call = substrate.compose_call(
                "Balances", "transfer_keep_alive", {"dest": dest, "value": amount}
            )
            nonce = self.nonces.take()
            xt = substrate.create_signed_extrinsic(call=call, keypair=self.keypair, nonce=nonce)
            # Where a later run starts looking for it: the follower's last best block (no
            # extra round trip under the lock), else the node's.
            from_block = self._best_seen if self._best_seen is not None else \
                self._rpc.best_number()
        except SignerError:
            raise
        except Exception as exc:
            self._submitter = None
            raise ChainUnavailable(f"the chain RPC {self.url} is unreachable ({exc})") from exc
        xt_hash = "0x" + xt.extrinsic_hash.hex()
        data = str(xt.data)
        if journal is not None:
            try:
                journal(Signed(xt_hash, nonce, from_block))
            except Exception as exc:
                raise SignerError("journal", f"the drip could not be recorded ({exc})") from exc
        now = time.monotonic()
        ticket = Ticket(extrinsic_hash=xt_hash, submitted_at=now, nonce=nonce, data=data,
                        expires_at=now + self._ttl, last_sent=now)
        with self._pending_lock:  # registered before submission: the follower cannot miss it
            self._pending[xt_hash] = ticket
        self._wake.set()
        try:
            answer = substrate.rpc_request("author_submitExtrinsic", [data])
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
            # The request may have reached the node: its outcome is unknown, so the ticket
            # stays followed (and the nonce counted) until the chain tells. The client stays:
            # its runtime is still right, and its HTTP session opens a new connection.
            ticket.uncertain = True
            log.warning("transfer %s (nonce %d): the submission's answer was lost (%s); the"
                        " chain decides its outcome", xt_hash, nonce, type(exc).__name__)
            return ticket
        answer = answer.get("result") if isinstance(answer, dict) else answer
        if isinstance(answer, str) and answer.lower() != xt_hash:
            log.warning("node reports extrinsic hash %s, computed %s", answer, xt_hash)
        return ticket

    def adopt(self, extrinsic_hash: str, nonce: int, from_block: int, age_s: float) -> Ticket:
        """Follow a transfer signed by an earlier run of this faucet (the journal's record):
        its blocks are scanned again from ``from_block``, and it resolves when found there or
        when its nonce is used. Its signed bytes are not kept (they name the recipient), so it
        is never sent again; if it never reached the node, the next drip takes its nonce."""
        now = time.monotonic()
        ticket = Ticket(extrinsic_hash=extrinsic_hash, submitted_at=now - age_s, nonce=nonce,
                        expires_at=now - age_s + self._ttl, last_sent=now)
        with self._pending_lock:
            self._pending[ticket.extrinsic_hash] = ticket
            self._rescan_from = min(self._rescan_from or from_block, from_block)
        self._wake.set()
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
            with contextlib.suppress(Exception):
                self._expire()
            with self._pending_lock:
                busy = bool(self._pending or self._in_block) or self._rescan_from is not None
            self._wake.wait(self._poll if busy else max(self._poll, IDLE_FOLLOW_S))
            self._wake.clear()

    def _forget(self, xt_hash: str) -> None:
        with self._pending_lock:
            self._pending.pop(xt_hash, None)

    def _resolve(self, ticket: Ticket, **changes: Any) -> None:
        ticket._update(**changes)
        try:
            self._on_resolved(ticket)
        except Exception:
            log.exception("block follower: recording ticket %s failed", ticket.extrinsic_hash)

    def _follow_once(self, last: int | None) -> int:
        # Best first, pending second: a drip registered after this read lands in a later block.
        best = int(self._rpc.call("chain_getHeader")["number"], 16)
        self._best_seen = best
        with self._pending_lock:
            waiting = bool(self._pending)
            watching = bool(self._in_block)
            rescan, self._rescan_from = self._rescan_from, None
        if rescan is not None:
            last = min(best if last is None else last, rescan - 1)
        elif last is None or not waiting:
            last = best
        try:
            for number in range(last + 1, best + 1):
                self._scan(number)
                last = number
        except Exception:
            with self._pending_lock:  # scanned up to ``last``: the rest again next time
                self._rescan_from = min(self._rescan_from or last + 1, last + 1)
            raise
        if waiting:
            self._reconcile(best)
        if watching:
            self._check_finality()
        return last

    def _reconcile(self, best: int) -> None:
        """Pending tickets against the account's nonce at ``best`` (every block up to it is
        scanned): one whose nonce is used without it being in a block will never apply; one
        whose submission's answer was lost is sent again, same bytes, same nonce."""
        best_hash = self._rpc.call("chain_getBlockHash", [best])
        used = int(self._account(self.address, best_hash)["nonce"])
        now = time.monotonic()
        with self._pending_lock:
            dropped = [t for t in self._pending.values() if 0 <= t.nonce < used]
            for ticket in dropped:
                self._pending.pop(ticket.extrinsic_hash, None)
            resend = [t for t in self._pending.values()
                      if t.uncertain and t.data and now - t.last_sent >= RESEND_AFTER_S]
        for ticket in dropped:
            log.warning("transfer %s: nonce %d was used by another transaction at block %d; it"
                        " was never applied", ticket.extrinsic_hash, ticket.nonce, best)
            self._resolve(ticket, dropped=True)
        for ticket in resend:
            self._resend(ticket)

    def _resend(self, ticket: Ticket) -> None:
        ticket.last_sent = time.monotonic()
        try:
            self._rpc.call("author_submitExtrinsic", [ticket.data])
        except RpcError as exc:
            text = str(exc)
            if any(marker in text for marker in _ALREADY_IMPORTED):
                ticket.uncertain = False  # the first submission did reach the pool
            # Outdated or stale: the nonce is used; the next reconcile says by whom. A
            # transport error: the next round tries again.
            return
        ticket.uncertain = False
        log.warning("transfer %s: the first submission never reached the pool; sent the same"
                    " signed bytes (nonce %d) again", ticket.extrinsic_hash, ticket.nonce)

    def _expire(self) -> None:
        now = time.monotonic()
        with self._pending_lock:
            expired = [t for t in self._pending.values() if now > t.expires_at]
            for ticket in expired:
                self._pending.pop(ticket.extrinsic_hash, None)
            for xt_hash in [h for h, t in self._in_block.items() if now > t.expires_at]:
                self._in_block.pop(xt_hash, None)  # in a block; its finality is not watched
        if expired:
            # Their nonces may never have reached the node: the next one is read from the chain
            # again, so that later drips do not wait behind a gap for ever.
            with self._submit_lock:
                self.nonces.invalidate()
        for ticket in expired:
            log.error("transfer %s (nonce %d): no block holds it and its nonce is unused after"
                      " %g s; no longer followed", ticket.extrinsic_hash, ticket.nonce, self._ttl)
            self._resolve(ticket, expired=True)

    def _scan(self, number: int) -> None:
        block_hash = self._rpc.call("chain_getBlockHash", [number])
        block = self._rpc.call("chain_getBlock", [block_hash])
        found: list[tuple[int, Ticket]] = []
        with self._pending_lock:
            for index, hex_xt in enumerate(block["block"]["extrinsics"]):
                xt_hash = "0x" + blake2_256(bytes.fromhex(hex_xt[2:])).hex()
                ticket = self._pending.get(xt_hash)
                if ticket is not None:
                    found.append((index, ticket))
        if not found:
            return
        failures = self._failures(block_hash)
        now = time.monotonic()
        for index, ticket in found:
            with self._pending_lock:
                self._pending.pop(ticket.extrinsic_hash, None)
            if index in failures:
                self._resolve(ticket, failure=failures[index], block_hash=block_hash,
                              block_number=number, included_at=now)
                continue
            with self._pending_lock:
                self._in_block[ticket.extrinsic_hash] = ticket
            self._resolve(ticket, block_hash=block_hash, block_number=number, included_at=now)

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

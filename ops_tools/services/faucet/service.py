"""One drip from request to block: validation, idempotency, balances, limits, the signer, the
ledger. Blocking code (database, chain reads, the signer's waits); the HTTP layer (``api``) runs
it in worker threads and shapes the answers.

Order matters: everything that may refuse runs before the reservation, and the reservation (one
serialised transaction over every limit) runs before anything is signed; the signed transfer is
journaled before it is sent; a submission the node refuses releases the reservation, so a
refused request spends nothing and counts for nothing.

Once sent, a drip is the faucet's, not the request's: the settler thread records its outcome
(included, failed in its block, never applied, or unknown after ``ticket_ttl_s``) whenever the
signer's follower resolves it, whether the client still waits, hung up, or the answer to the
submission was lost. A request waits for that record; a retry with the same ``Idempotency-Key``
waits for it too and gets the same result.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ops_tools.services.common.errors import ApiError
from ops_tools.services.common.hashing import salted_hash
from ops_tools.services.common.ratelimit import LimitExceeded, RateLimiter
from ops_tools.services.common.readiness import ChainWatch, CheckResult, ReadyCheck
from ops_tools.services.faucet import policy, ss58
from ops_tools.services.faucet.config import FaucetSettings
from ops_tools.services.faucet.lease import SignerLease
from ops_tools.services.faucet.metrics import FaucetMetrics
from ops_tools.services.faucet.signer import (
    ChainUnavailable,
    Signed,
    Signer,
    SignerError,
    Ticket,
)
from ops_tools.services.faucet.store import DripRow, Ledger, Pruned

log = logging.getLogger("net.faucet")
IDEMPOTENCY_KEY_RE = re.compile(r"^[\x21-\x7e]{1,128}$")
RETRY_CHAIN_S = 5
RETRY_EMPTY_S = 300
# Rows that never got as far as being signed are pruned this often (seconds), once older than
# this many RPC timeouts.
PRUNE_EVERY_S = 10.0
PENDING_TIMEOUTS = 6
# A retry whose first request vanished (refused, or never applied) is judged afresh, at most
# this many times in one request.
MAX_REOPEN = 3
UNSETTLED = ("pending", "submitted")


def format_tokens(plancks: int, decimals: int) -> str:
    whole, frac = divmod(plancks, 10**decimals)
    frac_text = f"{frac:0{decimals}d}".rstrip("0") if decimals else ""
    return f"{whole}.{frac_text}" if frac_text else str(whole)


@dataclass
class Started:
    """A drip submitted (or an idempotent replay of an earlier one); ``settled`` is set once its
    outcome is recorded, with ``result`` or ``error``."""

    recipient: str
    genesis: str
    replay: dict[str, Any] | None = None
    drip_id: int = 0
    reservation: str = ""
    reserved_at: float = 0.0
    ticket: Ticket | None = None
    result: dict[str, Any] | None = None
    error: ApiError | None = None
    settled: threading.Event = field(default_factory=threading.Event)


class Faucet:
    def __init__(self, settings: FaucetSettings, *, ledger: Ledger, limiter: RateLimiter,
                 signer: Signer, watch: ChainWatch, metrics: FaucetMetrics, salt: bytes,
                 lease: SignerLease | None = None,
                 wake: threading.Event | None = None) -> None:
        self.settings = settings
        self.ledger = ledger
        self.limiter = limiter
        self.signer = signer
        self.watch = watch
        self.metrics = metrics
        self.salt = salt
        self.lease = lease
        self.own_account = signer.keypair.public_key
        self._balance: tuple[float, int] | None = None
        self._balance_lock = threading.Lock()
        # Drips sent and not yet recorded, by extrinsic hash; the signer's follower sets
        # ``wake`` when it resolves a ticket.
        self._flight: dict[str, Started] = {}
        self._flight_lock = threading.Lock()
        self.wake = wake or threading.Event()
        self._adopted = False
        self._pruned_at = 0.0

    # --- the faucet's own balance ------------------------------------------------------------

    def refresh_balance(self) -> int:
        balance = self.signer.balance()
        with self._balance_lock:
            self._balance = (time.monotonic(), balance)
        self.metrics.balance.set(balance)
        return balance

    def known_balance(self) -> int | None:
        with self._balance_lock:
            if self._balance and time.monotonic() - self._balance[0] < \
                    2 * self.settings.balance_refresh_s:
                return self._balance[1]
        return None

    def balance_check(self) -> ReadyCheck:
        def probe() -> CheckResult:
            try:
                balance = self.known_balance()
                if balance is None:
                    balance = self.refresh_balance()
            except ChainUnavailable as exc:
                return CheckResult(False, f"cannot read the faucet's balance: {exc}")
            need = self.settings.drip_plancks
            if balance < need:
                return CheckResult(False, self._empty_message(balance))
            tokens = format_tokens(balance, self.settings.token_decimals)
            return CheckResult(True, f"balance {tokens} {self.settings.token_symbol}"
                                     f" ({balance} plancks), {balance // need} drips left")

        return ReadyCheck("faucet_balance", probe)

    def _empty_message(self, balance: int) -> str:
        return (
            f"the faucet's account {self.signer.address} holds {balance} plancks, less than one"
            f" drip ({self.settings.drip_plancks}); the operators must refill it"
        )

    # --- one drip ----------------------------------------------------------------------------

    def genesis(self) -> str:
        try:
            genesis = self.watch.current_genesis()
        except Exception as exc:
            raise ApiError(503, "chain_unavailable",
                           f"the chain RPC does not answer ({exc}); try again later",
                           retry_after=RETRY_CHAIN_S) from None
        if genesis != self.watch.expected:
            raise ApiError(
                503, "genesis_changed",
                f"the chain serves genesis {genesis}, but this faucet was started for"
                f" {self.watch.expected}; the network was reset and the faucet must restart",
                retry_after=RETRY_CHAIN_S, chain_genesis=genesis,
                faucet_genesis=self.watch.expected,
            )
        return genesis

    def recipient(self, text: str) -> ss58.Address:
        try:
            address = ss58.decode(text.strip(), self.settings.ss58_prefix)
        except ss58.AddressError as exc:
            raise ApiError(400, "invalid_recipient", f"recipient: {exc}", field="recipient",
                           reason=exc.code) from None
        if address.account_id == self.own_account:
            raise ApiError(400, "invalid_recipient",
                           "recipient: that is the faucet's own address; give your account's",
                           field="recipient", reason="faucet_address")
        return address

    def start(self, recipient_text: str, client_ip: str,
              idempotency_key: str | None) -> Started:
        """Validate, reserve and submit; raises ``ApiError`` for every refusal."""
        address = self.recipient(recipient_text)
        idem_hash = None
        if idempotency_key is not None:
            if not IDEMPOTENCY_KEY_RE.match(idempotency_key):
                raise ApiError(400, "invalid_header",
                               "Idempotency-Key: expected 1 to 128 printable ASCII characters",
                               field="Idempotency-Key")
            idem_hash = salted_hash(self.salt, "idempotency:" + idempotency_key)
        genesis = self.genesis()
        recipient = ss58.encode(address.account_id, self.settings.ss58_prefix)
        account_hex = address.account_id.hex()
        recipient_hash = salted_hash(self.salt, "recipient:" + account_hex)
        client_hash = salted_hash(self.salt, "ip:" + client_ip)
        for _ in range(MAX_REOPEN):
            opened = self.ledger.open(genesis, recipient_hash, client_hash,
                                      self.settings.drip_plancks, idem_hash)
            if not isinstance(opened, DripRow):
                return self._submit(opened, recipient, account_hex, client_ip, genesis)
            replay = self._replay(opened, recipient_hash)
            if replay is not None:
                return Started(recipient, genesis, replay={"recipient": recipient, **replay})
        raise ApiError(409, "in_progress", "requests with this Idempotency-Key keep failing;"
                       " retry in a moment", retry_after=RETRY_CHAIN_S)

    def _submit(self, drip_id: int, recipient: str, account_hex: str, client_ip: str,
                genesis: str) -> Started:
        try:
            if self.lease is not None and not self.lease.held():
                raise ApiError(503, "signer_lease_lost",
                               "this faucet instance does not hold its signer's lease (see"
                               " /ready); nothing was sent, try again later",
                               retry_after=RETRY_CHAIN_S)
            self._precheck(recipient)
            rules = policy.rules_for(self.settings.limits, account_hex, client_ip)
            reserved_at = time.time()
            try:
                reservation = self.limiter.reserve(rules, genesis)
            except LimitExceeded as exc:
                code, message, details = policy.refusal(exc)
                raise ApiError(429, code, message, retry_after=exc.retry_after,
                               **details) from None
        except BaseException:
            self.ledger.discard(drip_id)
            raise

        def journal(signed: Signed) -> None:
            self.ledger.journal(drip_id, signer=self.own_account.hex(), reservation=reservation,
                                extrinsic_hash=signed.extrinsic_hash, nonce=signed.nonce,
                                from_block=signed.from_block)

        try:
            ticket = self.signer.transfer(recipient, self.settings.drip_plancks, journal)
        except SignerError as exc:
            self.limiter.release(reservation)
            self.ledger.discard(drip_id)
            if isinstance(exc, ChainUnavailable):
                raise ApiError(503, "chain_unavailable", f"{exc}; nothing was sent, try again",
                               retry_after=RETRY_CHAIN_S) from None
            if exc.code == "journal" and isinstance(exc.__cause__, Pruned):
                raise ApiError(409, "in_progress", "this drip took too long before it was"
                               " sent and was given up; nothing was sent, try again",
                               retry_after=RETRY_CHAIN_S) from None
            if exc.code == "journal":
                raise ApiError(503, "ledger_unavailable", f"{exc}; nothing was sent, try again",
                               retry_after=RETRY_CHAIN_S) from None
            raise ApiError(502, "submission_refused",
                           f"{exc}; nothing was sent, try again later",
                           retry_after=RETRY_CHAIN_S) from None
        except BaseException:
            self.limiter.release(reservation)
            self.ledger.discard(drip_id)
            raise
        self.metrics.in_flight.inc()
        started = Started(recipient, genesis, drip_id=drip_id, reservation=reservation,
                          reserved_at=reserved_at, ticket=ticket)
        self._track(started)
        return started

    def _track(self, started: Started) -> None:
        assert started.ticket is not None
        with self._flight_lock:
            self._flight[started.ticket.extrinsic_hash] = started
        if started.ticket.resolved:  # resolved before it was tracked: settle it now
            self.wake.set()

    def _precheck(self, recipient: str) -> None:
        need = self.settings.drip_plancks
        try:
            # The background refresh keeps the faucet's own balance fresh enough: a drip it
            # cannot pay is refused by the node and spends nothing.
            balance = self.known_balance()
            if balance is None:
                balance = self.refresh_balance()
            held = self.signer.free_balance(recipient)
        except ChainUnavailable as exc:
            raise ApiError(503, "chain_unavailable", f"{exc}; try again later",
                           retry_after=RETRY_CHAIN_S) from None
        if balance < need:
            raise ApiError(503, "faucet_empty", self._empty_message(balance),
                           retry_after=RETRY_EMPTY_S)
        refused = policy.balance_refusal(held, self.settings.limits.balance_cap_plancks)
        if refused:
            raise ApiError(403, "balance_cap", refused, field="recipient",
                           balance_plancks=str(held),
                           cap_plancks=str(self.settings.limits.balance_cap_plancks))

    def _replay(self, row: DripRow, recipient_hash: str) -> dict[str, Any] | None:
        """The first result of an Idempotency-Key, once the drip that holds it is settled;
        None when that drip is gone (refused, or never applied): judge the retry afresh."""
        if row.recipient_hash != recipient_hash:
            raise ApiError(422, "idempotency_key_reused",
                           "Idempotency-Key: already used for another recipient; use a new key",
                           field="Idempotency-Key")
        deadline = time.monotonic() + self.settings.inclusion_timeout_s
        current: DripRow | None = row
        while current is not None and current.status in UNSETTLED \
                and time.monotonic() < deadline:
            time.sleep(self.settings.poll_interval_s)
            current = self.ledger.get(row.id)
        if current is None or current.status in ("failed", "dropped"):
            return None
        if current.status == "included" and current.response is not None:
            return current.response
        if current.status in UNSETTLED:
            raise ApiError(409, "in_progress",
                           "the first request with this Idempotency-Key is still running;"
                           " retry in a moment", retry_after=2)
        raise ApiError(
            409, "outcome_unknown",
            f"the first request with this Idempotency-Key submitted {current.extrinsic_hash}"
            " but neither its block nor another use of its nonce was seen; check the"
            " recipient's balance before asking again",
            extrinsic_hash=current.extrinsic_hash,
        )

    def finish(self, started: Started) -> dict[str, Any]:
        """Wait until the drip is recorded; the success object, or ``ApiError``."""
        if started.replay is not None:
            return started.replay
        ticket = started.ticket
        assert ticket is not None
        if not started.settled.wait(self.settings.inclusion_timeout_s):
            raise ApiError(
                504, "inclusion_timeout",
                f"the transfer {ticket.extrinsic_hash} was submitted but not seen in a block"
                f" within {self.settings.inclusion_timeout_s:g} s; the faucet keeps following"
                " it and a retry with the same Idempotency-Key gets its result; check your"
                " balance before asking again", extrinsic_hash=ticket.extrinsic_hash)
        if started.error is not None:
            raise started.error
        assert started.result is not None
        return started.result

    def wait_finalized(self, started: Started) -> bool:
        if started.ticket is None:
            return True
        return started.ticket.wait_finalized(self.settings.finality_timeout_s)

    # --- the settler: outcomes recorded whoever waits ------------------------------------------

    def run_settler(self, stop: threading.Event) -> None:
        failing = False
        while not stop.is_set():
            self.wake.wait(self.settings.poll_interval_s)
            self.wake.clear()
            try:
                self.settle_resolved()
                if not self._adopted:
                    self.adopt()
                if time.monotonic() - self._pruned_at >= PRUNE_EVERY_S:
                    self._pruned_at = time.monotonic()
                    self.prune()
                failing = False
            except Exception as exc:  # the database or the chain is away: next round
                if not failing:  # once per outage, not once per poll
                    log.warning("settler: %s: %s; retrying", type(exc).__name__, exc)
                failing = True

    def drain(self, timeout_s: float) -> int:
        """At shutdown: let the drips in flight settle (their requests may be gone); the number
        left, which the next start adopts from the journal."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._flight_lock:
                if not self._flight:
                    return 0
            time.sleep(self.settings.poll_interval_s)
        with self._flight_lock:
            return len(self._flight)

    def settle_resolved(self) -> None:
        with self._flight_lock:
            ready = [s for s in self._flight.values() if s.ticket and s.ticket.resolved]
        for started in ready:
            self._settle(started)  # raises on a database error: the next round tries again
            assert started.ticket is not None
            with self._flight_lock:
                self._flight.pop(started.ticket.extrinsic_hash, None)
            self.metrics.in_flight.dec()
            started.settled.set()
        # A drip in a block (failed ones too) used its nonce: drips that expired with it unused
        # can be settled now.
        for genesis in {s.genesis for s in ready if s.ticket and s.ticket.block_hash}:
            self._forget_never_applied(genesis)

    def _settle(self, started: Started) -> None:
        ticket = started.ticket
        assert ticket is not None
        if ticket.failure is not None:
            # In a block but failed: the fee is gone, the drip is not; it counts for nothing.
            self.limiter.release(started.reservation)
            self.ledger.update(started.drip_id, status="failed", idempotency_hash=None,
                               error_code="dispatch_failed", block_hash=ticket.block_hash,
                               block_number=ticket.block_number)
            log.error("drip failed in block %s: %s", ticket.block_hash, ticket.failure)
            started.error = ApiError(
                502, "drip_failed", f"the transfer {ticket.extrinsic_hash} failed in block"
                f" {ticket.block_hash} ({ticket.failure}); try again later",
                extrinsic_hash=ticket.extrinsic_hash)
        elif ticket.block_hash is not None:
            self.limiter.commit(started.reservation)
            started.result = self._included(started, ticket)
        elif ticket.dropped:
            # The chain used its nonce for another transaction: it can never apply.
            self.limiter.release(started.reservation)
            self.ledger.update(started.drip_id, status="dropped", idempotency_hash=None,
                               error_code="nonce_used")
            started.error = ApiError(
                502, "not_sent", f"the transfer {ticket.extrinsic_hash} was never applied: the"
                f" chain used its nonce ({ticket.nonce}) for another transaction; nothing was"
                " sent, try again", retry_after=RETRY_CHAIN_S,
                extrinsic_hash=ticket.extrinsic_hash)
        else:
            # Followed for ticket_ttl_s without an answer: it may still land, so it counts.
            self.limiter.commit(started.reservation)
            self.ledger.update(started.drip_id, status="unknown", error_code="ticket_expired")
            started.error = ApiError(
                504, "inclusion_timeout", f"the transfer {ticket.extrinsic_hash} was neither"
                " seen in a block nor replaced; check your balance before asking again",
                extrinsic_hash=ticket.extrinsic_hash)

    def _forget_never_applied(self, genesis: str) -> None:
        """Drips whose ticket expired (outcome unknown, counted against their recipient) are
        settled once the chain has used their nonce for a later drip: never applied, so their
        reservations are released and a retry with their key is judged afresh, not 409."""
        for row in self.ledger.never_applied(genesis, self.own_account.hex()):
            if row.reservation:
                self.limiter.release(row.reservation)
            log.warning("drip %s (nonce %s), unknown since its ticket expired, was never"
                        " applied: a later drip used its nonce", row.extrinsic_hash, row.nonce)

    def _included(self, started: Started, ticket: Ticket) -> dict[str, Any]:
        assert ticket.included_at is not None and ticket.block_number is not None
        self.metrics.inclusion.observe(max(0.0, ticket.included_at - ticket.submitted_at))
        self.metrics.drips.inc()
        self.metrics.dripped.inc(self.settings.drip_plancks)
        window = self.settings.limits.recipient_window_s
        amount = self.settings.drip_plancks
        stored = {
            "amount": {
                "plancks": str(amount),
                "tokens": format_tokens(amount, self.settings.token_decimals),
                "symbol": self.settings.token_symbol,
                "decimals": self.settings.token_decimals,
            },
            "extrinsic_hash": ticket.extrinsic_hash,
            "block_hash": ticket.block_hash,
            "block_number": ticket.block_number,
            "genesis_hash": started.genesis,
            "next_drip_at": policy.iso(started.reserved_at + window),
            "retry_after_s": window,
        }
        # Kept for idempotent replays, without the address: the ledger holds only its hash.
        self.ledger.update(started.drip_id, status="included", block_hash=ticket.block_hash,
                           block_number=ticket.block_number, response=stored)
        return {"recipient": started.recipient, **stored}

    def adopt(self) -> None:
        """Follow again the drips an earlier run of this faucet sent and never recorded (it
        stopped or crashed in between); the lease makes them this instance's alone."""
        genesis = self.genesis()
        now = time.time()
        for row in self.ledger.submitted(genesis, self.own_account.hex()):
            if row.extrinsic_hash is None or row.nonce is None:
                continue
            with self._flight_lock:
                if row.extrinsic_hash in self._flight:
                    continue
            age = now - row.created_at
            if age > self.settings.ticket_ttl_s:
                self.ledger.update(row.id, status="unknown", error_code="ticket_expired")
                continue
            ticket = self.signer.adopt(row.extrinsic_hash, row.nonce, row.from_block or 0, age)
            log.info("following drip %s again (sent by an earlier run)", row.extrinsic_hash)
            self.metrics.in_flight.inc()
            self._track(Started("", genesis, drip_id=row.id, reservation=row.reservation or "",
                                reserved_at=row.created_at, ticket=ticket))
        self._forget_never_applied(genesis)  # expired under an earlier run, settled since
        self._adopted = True

    def prune(self) -> None:
        """Rows of requests that died before anything was signed (a crash, a hung node)."""
        # Before its signature a request makes a handful of chain reads, each bounded by
        # rpc_timeout_s. Pruning one that is merely slow is harmless: its journal finds the row
        # gone, nothing is sent and its reservation is released.
        cutoff = time.time() - PENDING_TIMEOUTS * self.settings.rpc_timeout_s
        if (n := self.ledger.prune_pending(cutoff)):
            log.warning("pruned %d drip(s) abandoned before they were signed", n)

"""One drip from request to block: validation, idempotency, balances, limits, the signer, the
ledger. Blocking code (database, chain reads, the signer's waits); the HTTP layer (``api``) runs
it in worker threads and shapes the answers.

Order matters: everything that may refuse runs before the reservation, and the reservation (one
serialised transaction over every limit) runs before anything is submitted; a submission that
fails releases the reservation, so a refused or failed request spends nothing and counts for
nothing.
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
from ops_tools.services.faucet.ledger import DripRow, Ledger
from ops_tools.services.faucet.metrics import FaucetMetrics
from ops_tools.services.faucet.signer import ChainUnavailable, Signer, SignerError, Ticket

log = logging.getLogger("net.faucet")
IDEMPOTENCY_KEY_RE = re.compile(r"^[\x21-\x7e]{1,128}$")
RETRY_CHAIN_S = 5
RETRY_EMPTY_S = 300


def format_tokens(plancks: int, decimals: int) -> str:
    whole, frac = divmod(plancks, 10**decimals)
    frac_text = f"{frac:0{decimals}d}".rstrip("0") if decimals else ""
    return f"{whole}.{frac_text}" if frac_text else str(whole)


@dataclass
class Started:
    """A drip submitted (or an idempotent replay of an earlier one)."""

    recipient: str
    genesis: str
    replay: dict[str, Any] | None = None
    drip_id: int = 0
    reservation: str = ""
    reserved_at: float = 0.0
    ticket: Ticket | None = None
    result: dict[str, Any] | None = field(default=None)


class Faucet:
    def __init__(self, settings: FaucetSettings, *, ledger: Ledger, limiter: RateLimiter,
                 signer: Signer, watch: ChainWatch, metrics: FaucetMetrics, salt: bytes) -> None:
        self.settings = settings
        self.ledger = ledger
        self.limiter = limiter
        self.signer = signer
        self.watch = watch
        self.metrics = metrics
        self.salt = salt
        self.own_account = signer.keypair.public_key
        self._balance: tuple[float, int] | None = None
        self._balance_lock = threading.Lock()

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
        opened = self.ledger.open(genesis, recipient_hash, client_hash,
                                  self.settings.drip_plancks, idem_hash)
        if isinstance(opened, DripRow):
            replay = {"recipient": recipient, **self._replay(opened, recipient_hash)}
            return Started(recipient, genesis, replay=replay)
        drip_id = opened
        try:
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
        try:
            ticket = self.signer.transfer(recipient, self.settings.drip_plancks)
        except SignerError as exc:
            self.limiter.release(reservation)
            self.ledger.discard(drip_id)
            if isinstance(exc, ChainUnavailable):
                raise ApiError(503, "chain_unavailable", f"{exc}; nothing was sent, try again",
                               retry_after=RETRY_CHAIN_S) from None
            raise ApiError(502, "submission_refused",
                           f"{exc}; nothing was sent, try again later",
                           retry_after=RETRY_CHAIN_S) from None
        except BaseException:
            self.limiter.release(reservation)
            self.ledger.discard(drip_id)
            raise
        self.metrics.in_flight.inc()
        self.ledger.update(drip_id, reservation=reservation, extrinsic_hash=ticket.extrinsic_hash)
        return Started(recipient, genesis, drip_id=drip_id, reservation=reservation,
                       reserved_at=reserved_at, ticket=ticket)

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

    def _replay(self, row: DripRow, recipient_hash: str) -> dict[str, Any]:
        if row.recipient_hash != recipient_hash:
            raise ApiError(422, "idempotency_key_reused",
                           "Idempotency-Key: already used for another recipient; use a new key",
                           field="Idempotency-Key")
        if row.status == "included" and row.response is not None:
            return row.response
        if row.status == "pending":
            raise ApiError(409, "in_progress",
                           "the first request with this Idempotency-Key is still running;"
                           " retry in a moment", retry_after=2)
        raise ApiError(
            409, "outcome_unknown",
            f"the first request with this Idempotency-Key submitted {row.extrinsic_hash} but"
            " its inclusion was not seen; check the recipient's balance before asking again",
            extrinsic_hash=row.extrinsic_hash,
        )

    def finish(self, started: Started) -> dict[str, Any]:
        """Wait for the drip's block; the success object, or ``ApiError``."""
        if started.replay is not None:
            return started.replay
        ticket = started.ticket
        assert ticket is not None
        ok = ticket.wait_included(self.settings.inclusion_timeout_s)
        self.metrics.in_flight.dec()
        if ticket.failure is not None:
            # In a block but failed: the fee is gone, the drip is not; it counts for nothing.
            self.limiter.release(started.reservation)
            self.ledger.update(started.drip_id, status="failed", idempotency_hash=None,
                               error_code="dispatch_failed", block_hash=ticket.block_hash,
                               block_number=ticket.block_number)
            log.error("drip failed in block %s: %s", ticket.block_hash, ticket.failure)
            raise ApiError(502, "drip_failed",
                           f"the transfer {ticket.extrinsic_hash} failed in block"
                           f" {ticket.block_hash} ({ticket.failure}); try again later",
                           extrinsic_hash=ticket.extrinsic_hash)
        if not ok:
            # Submitted, not seen in a block: it may still land, so the limits keep counting it
            # and the next nonce is read from the chain.
            self.signer.nonces.invalidate()
            self.limiter.commit(started.reservation)
            self.ledger.update(started.drip_id, status="unknown", error_code="inclusion_timeout")
            raise ApiError(
                504, "inclusion_timeout",
                f"the transfer {ticket.extrinsic_hash} was submitted but not seen in a block"
                f" within {self.settings.inclusion_timeout_s:g} s; check your balance before"
                " asking again", extrinsic_hash=ticket.extrinsic_hash)
        self.limiter.commit(started.reservation)
        assert ticket.included_at is not None and ticket.block_number is not None
        self.metrics.inclusion.observe(ticket.included_at - ticket.submitted_at)
        self.metrics.drips.inc()
        self.metrics.dripped.inc(self.settings.drip_plancks)
        window = self.settings.limits.recipient_window_s
        amount = self.settings.drip_plancks
        result = {
            "recipient": started.recipient,
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
        stored = {k: v for k, v in result.items() if k != "recipient"}
        self.ledger.update(started.drip_id, status="included", block_hash=ticket.block_hash,
                           block_number=ticket.block_number, response=stored)
        started.result = result
        return result

    def wait_finalized(self, started: Started) -> bool:
        if started.ticket is None:
            return True
        return started.ticket.wait_finalized(self.settings.finality_timeout_s)

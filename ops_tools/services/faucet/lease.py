"""The signer's lease: one faucet instance at a time signs with an account.

Two instances signing with one seed share one nonce space: each hands out the same nonces and
the pool refuses (or replaces) the other's transfers. The lease is a row in the shared database
(``faucet_signer_leases``, keyed by the account): an instance takes it at start, or refuses to
start while another holds it; it renews it every third of its duration and gives it up when it
stops. An instance that cannot renew (the database is away, or another took the lease after it
expired) stops signing until it holds it again; ``/ready`` says so.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, insert, select, update

from ops_tools.errors import InputError
from ops_tools.services.common.db import Database
from ops_tools.services.common.readiness import CheckResult, ReadyCheck
from ops_tools.services.faucet.policy import iso
from ops_tools.services.faucet.store import signer_leases

log = logging.getLogger("net.faucet.lease")


@dataclass(frozen=True)
class Holder:
    holder: str
    host: str
    pid: int
    expires_at: float


class LeaseHeld(InputError):
    """Another live instance signs with this account."""


class SignerLease:
    def __init__(self, db: Database, account: str, address: str, duration_s: float) -> None:
        self.db = db
        self.account = account
        self.address = address
        self.duration_s = duration_s
        self.me = Holder(uuid.uuid4().hex, socket.gethostname()[:255], os.getpid(), 0.0)
        self._held_until = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- database ----------------------------------------------------------------------------

    def _take(self) -> Holder | None:
        """Take or renew the lease; the live holder that refuses it otherwise."""
        t = signer_leases
        with self.db.session(write=True) as s:
            self.db.lock(s, f"{t.name}:{self.account}")
            # The row holds wall-clock times (other hosts read them); this process's own
            # deadline runs on the monotonic clock, from before the row was written.
            now, started = time.time(), time.monotonic()
            row = s.execute(select(t).where(t.c.account == self.account)).first()
            until = now + self.duration_s
            if row is None:
                s.execute(insert(t).values(account=self.account, holder=self.me.holder,
                                           host=self.me.host, pid=self.me.pid,
                                           acquired_at=now, expires_at=until))
            elif row.holder == self.me.holder or row.expires_at <= now or self._dead(row):
                s.execute(update(t).where(t.c.account == self.account).values(
                    holder=self.me.holder, host=self.me.host, pid=self.me.pid,
                    acquired_at=now if row.holder != self.me.holder else row.acquired_at,
                    expires_at=until))
            else:
                return Holder(row.holder, row.host, int(row.pid), float(row.expires_at))
        with self._lock:
            self._held_until = started + self.duration_s
        return None

    def _dead(self, row: Any) -> bool:
        """The holder was a process on this host that is gone (a crash before it could give
        the lease up): its restart need not wait for the lease to expire."""
        if row.host != self.me.host or int(row.pid) == self.me.pid:
            return False
        try:
            os.kill(int(row.pid), 0)
        except ProcessLookupError:
            return True
        except OSError:
            return False  # alive, another user's
        return False

    def acquire(self) -> None:
        """At start: take the lease or refuse to start, naming who holds it until when."""
        other = self._take()
        if other is not None:
            raise LeaseHeld(
                f"seed_file: the account {self.address} is signing in another faucet instance"
                f" (host {other.host}, pid {other.pid}), whose lease lasts until"
                f" {iso(other.expires_at)}; two signers on one seed would spend the same"
                " nonces. Stop that instance, or give this one its own seed")

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        t = signer_leases
        try:
            with self.db.session(write=True) as s:
                s.execute(delete(t).where(t.c.account == self.account,
                                          t.c.holder == self.me.holder))
        except Exception as exc:  # it expires on its own
            log.warning("signer lease: not released (%s); it expires in %g s",
                        type(exc).__name__, self.duration_s)
        with self._lock:
            self._held_until = 0.0

    # --- while running -----------------------------------------------------------------------

    def held(self) -> bool:
        with self._lock:
            return time.monotonic() < self._held_until

    def start(self) -> None:
        self._thread = threading.Thread(target=self._renew, name="faucet-lease", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.duration_s / 3):
            try:
                other = self._take()
            except Exception as exc:
                log.warning("signer lease: renewal failed (%s)", type(exc).__name__)
                continue
            if other is not None and not self.held():
                log.error("signer lease: host %s pid %d holds the account %s; not signing",
                          other.host, other.pid, self.address)

    def ready_check(self) -> ReadyCheck:
        def probe() -> CheckResult:
            if self.held():
                return CheckResult(True, f"signing with {self.address}")
            return CheckResult(False, f"the signer's lease on {self.address} is not held (the"
                                      " database does not answer, or another instance took"
                                      " it); not signing")

        return ReadyCheck("signer_lease", probe)

"""The worker's liveness duties, each tick: register when asked to, announce itself to the
gateway, send the signed gateway heartbeat for the current epoch, and submit the on-chain
heartbeat (stepping one epoch at a time, as the runtime's epoch rule allows at most one epoch
of advance per heartbeat)."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from substrateinterface import Keypair, SubstrateInterface

from ops_tools.chain import substrate as chain_substrate
from ops_tools.chain.urls import http_url
from ops_tools.chain.wire.announce import sign_announce
from ops_tools.chain.wire.heartbeat import sign_heartbeat
from ops_tools.chain.wire.worker_token import MAX_LEN as MAX_TOKEN_LEN
from ops_tools.wallet import operator
from ops_tools.worker import sdnotify
from ops_tools.worker.config import WorkerSettings

log = logging.getLogger("net.worker")

# A read is a few small queries; a submission waits for its block on the same socket.
READ_TIMEOUT_S = 10.0
SUBMIT_TIMEOUT_S = 60.0


@dataclass
class LivenessState:
    genesis_hash: str | None = None
    epoch: int | None = None
    last_announce: float = 0.0
    gateway_heartbeat_epoch: int | None = None
    gateway_heartbeat_at: float = 0.0
    chain_heartbeat_epoch: int | None = None
    registered: bool = False
    # The token the gateway returned to the latest accepted announcement: the only credential
    # this worker's inference routes accept.
    gateway_token: str | None = None
    ticks_ok: int = 0
    errors: list[str] = field(default_factory=list)


class Liveness:
    def __init__(self, settings: WorkerSettings, keypair: Keypair, models: list[str]) -> None:
        self.settings = settings
        self.keypair = keypair
        self.models = models
        self.state = LivenessState()
        self.http = httpx.Client(timeout=10.0)
        self._reader: SubstrateInterface | None = None
        self._writer_conn: SubstrateInterface | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- chain -----------------------------------------------------------------------------
    def _read(self) -> SubstrateInterface:
        if self._reader is None:
            self._reader = chain_substrate.connect(http_url(self.settings.rpc_url),
                                                   READ_TIMEOUT_S)
        return self._reader

    def _writer(self) -> SubstrateInterface:
        # One WebSocket for every extrinsic, kept between ticks: a new connection fetches and
        # decodes the runtime's metadata again, most of an idle worker's CPU.
        if self._writer_conn is None:
            self._writer_conn = chain_substrate.connect(self.settings.rpc_url,
                                                        SUBMIT_TIMEOUT_S, reconnect=True)
        return self._writer_conn

    def _drop_writer(self) -> None:
        if self._writer_conn is not None:
            self._writer_conn.close()
            self._writer_conn = None

    def _submit(self, action: str, call: Any) -> None:
        try:
            sub = call(self._writer())
        except Exception:
            self._drop_writer()  # a fresh connection on the next try
            raise
        if not sub.success:
            raise RuntimeError(f"{action} failed: {sub.error_pallet}.{sub.error_name}")
        log.info("%s in block %s (%s)", action, sub.block_number, sub.extrinsic_hash)

    # --- one tick --------------------------------------------------------------------------
    def tick(self) -> None:
        s, st = self.settings, self.state
        address = self.keypair.ss58_address
        reader = self._read()
        try:
            genesis = operator.genesis_hash(reader)
            epoch = operator.current_epoch(reader)
            record = operator.operator_record(reader, address)
        except Exception:
            self._reader = None
            raise
        if s.genesis_hash is not None and genesis != s.genesis_hash.lower():
            raise RuntimeError(
                f"the chain at {s.rpc_url} serves genesis {genesis}, but this worker is"
                f" configured for {s.genesis_hash}; redeploy it on the new network")
        if genesis != st.genesis_hash:  # a new network (or first tick): everything again
            self.state = st = LivenessState(genesis_hash=genesis)
            self._drop_writer()
        st.epoch = epoch
        if not record and s.register_stake is not None:
            self._submit("OperatorStake.register", lambda sub: operator.register(
                sub, self.keypair, s.register_stake, "0x" + "00" * 32, s.account))
            record = operator.operator_record(reader, address)
        st.registered = bool(record)
        now = time.monotonic()
        if now - st.last_announce >= s.announce_interval_s:
            self._announce(genesis)
            st.last_announce = now
        # The gateway heartbeat first: the chain's may take a few blocks, and by then the epoch
        # read above could be the one before.
        if st.gateway_heartbeat_epoch != epoch or now - st.gateway_heartbeat_at >= \
                s.announce_interval_s:
            payload = sign_heartbeat(self.keypair, epoch=epoch, timestamp=int(time.time()),
                                     genesis_hash=genesis)
            self._post("/v1/workers/heartbeat", payload)
            st.gateway_heartbeat_epoch, st.gateway_heartbeat_at = epoch, now
        if record:
            last = int(record["last_heartbeat_epoch"])
            if last < epoch:
                self._chain_heartbeats(list(range(last + 1, epoch + 1)))
            st.chain_heartbeat_epoch = epoch

    def _chain_heartbeats(self, epochs: list[int]) -> None:
        """Heartbeats for ``epochs`` in order: the runtime allows one epoch of advance each, so
        a worker that was down steps up to the current one. All are sent at once with
        consecutive nonces (they apply in nonce order); only the last is waited for."""
        substrate = self._writer()
        try:
            nonce = substrate.get_account_nonce(self.keypair.ss58_address)
            for offset, target in enumerate(epochs):
                call = substrate.compose_call(operator.PALLET, "heartbeat", {"epoch": target})
                xt = substrate.create_signed_extrinsic(call=call, keypair=self.keypair,
                                                       nonce=nonce + offset)
                last = offset == len(epochs) - 1
                receipt = substrate.submit_extrinsic(xt, wait_for_inclusion=last)
                if last and not receipt.is_success:
                    raise RuntimeError(f"OperatorStake.heartbeat({target}) failed:"
                                       f" {receipt.error_message}")
        except Exception:
            self._drop_writer()
            raise
        log.info("on-chain heartbeat for epoch %s", epochs[-1])

    def _announce(self, genesis: str) -> None:
        payload = sign_announce(
            self.keypair, endpoint=self.settings.endpoint(), models=self.models,
            capacity=self.settings.capacity, timestamp=int(time.time()), genesis_hash=genesis,
        )
        answer = self._post("/v1/workers/announce", payload)
        token = answer.get("worker_token") if isinstance(answer, dict) else None
        if not (isinstance(token, str) and 0 < len(token) <= MAX_TOKEN_LEN):
            raise RuntimeError("gateway /v1/workers/announce: the answer carries no worker_token")
        self.state.gateway_token = token

    def _post(self, path: str, payload: dict[str, Any]) -> Any:
        response = self.http.post(self.settings.gateway_url + path, json=payload)
        if response.status_code != 200:
            raise RuntimeError(f"gateway {path}: {response.status_code} {response.text[:300]}")
        try:
            return response.json()
        except ValueError:
            return None

    # --- the thread ------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="liveness", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.http.close()
        self._drop_writer()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
                self.state.errors = []
                self.state.ticks_ok += 1
            except Exception as exc:
                message = f"{type(exc).__name__}: {exc}"[:300]
                if message not in self.state.errors:
                    log.warning("liveness: %s", message)
                self.state.errors = [message]
                self.state.last_announce = 0.0  # re-announce once the gateway answers again
            # The loop ran (whatever the tick's outcome): systemd's watchdog restarts a hung one.
            sdnotify.notify("WATCHDOG=1")
            self._stop.wait(self.settings.tick_s)

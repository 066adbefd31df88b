"""The OpenAI routes and the worker-facing routes of the gateway.

Hot path of an inference request: parse (orjson), one database transaction for the budget
reservation (and the rate window when the key has limits), a pooled keep-alive HTTP request
(aiohttp) to the least busy eligible worker, the answer relayed as it comes, chunk by chunk. The
receipt is written after the answer has left, in the background, while the reservation still holds
the budget; a streamed answer releases what it holds however it ends (``Relay``), also when the
client left before the first chunk.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Callable
from typing import Any

import aiohttp
import orjson
from starlette.requests import Request
from starlette.responses import Response

from ops_tools.asgi_stream import (
    DisconnectWatch,
    Receive,
    Send,
    body_message,
    start_message,
)
from ops_tools.chain.wire.announce import verify_announce
from ops_tools.chain.wire.heartbeat import verify_heartbeat_payload
from ops_tools.chain.wire.worker_view_request import verify_view_request
from ops_tools.services.gateway import openai_errors as oe
from ops_tools.services.gateway import store, usage, wire
from ops_tools.services.gateway.bounded import OverLimit, read_answer
from ops_tools.services.gateway.endpoints import endpoint_problem
from ops_tools.services.gateway.router import Worker
from ops_tools.services.gateway.service import ChainUnavailable, GatewayState
from ops_tools.sse import (
    DONE,
    EventSplitter,
    LineTooLong,
    StreamTally,
    classify,
    error_event,
)

TEST_MODE_HEADER = "X-Net-Test-Mode"
JSON = "application/json"
SSE_HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"),
               (b"cache-control", b"no-cache")]
UPSTREAM_ERRORS = (aiohttp.ClientError, TimeoutError)
CLIENT_CLOSED = 499  # nginx's status for a client that went away: only logs and metrics see it


def error_response(exc: oe.OpenAIError) -> Response:
    return Response(exc.json_bytes(), exc.status, headers=exc.headers(), media_type=JSON)


def _bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise oe.missing_api_key()
    return key.strip()


class Upstream(Exception):
    """The worker failed before answering (connect error, 5xx): another one may be tried."""


class GatewayApi:
    def __init__(self, state: GatewayState, max_body_bytes: int) -> None:
        self.state = state
        self.max_body_bytes = max_body_bytes

    # --- inference -------------------------------------------------------------------------
    async def inference(self, request: Request) -> Response:
        kind = wire.ENDPOINTS[request.url.path]
        # The platform's middleware made it (GatewayEdge drops a client's): the receipt's id.
        request_id = request.scope.get("net_request_id") or uuid.uuid4().hex
        try:
            return await self._inference(request, kind, request_id)
        except oe.OpenAIError as exc:
            return error_response(exc)

    async def _inference(self, request: Request, kind: str, request_id: str) -> Response:
        state = self.state
        key = _bearer(request)
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            raise oe.too_large(self.max_body_bytes)
        raw = await request.body()
        if len(raw) > self.max_body_bytes:
            raise oe.too_large(self.max_body_bytes)
        parsed = wire.parse(kind, raw, default_max_tokens=state.fields.default_max_tokens,
                            max_tokens_cap=state.fields.max_tokens_cap)
        price = state.price(parsed.model)
        max_cost = price.cost(parsed.max_input_tokens, parsed.max_output_tokens)
        # The receipt is opened with the reservation: a request this gateway loses (a crash, a
        # failed write) is found and its reservation released (``store.reconcile_open``).
        opening = store.Opening(request_id, parsed.model, kind, state.genesis_hash)
        try:
            reservation = await state.account(store.reserve, key, max_cost, time.time(), opening)
        except store.KeyRejected as rejected:
            raise _rejection(rejected) from None
        receipt = {
            "operator": None, "worker": None, "input_tokens": 0,
            "output_tokens": 0, "cost": 0, "status": "failed", "error": None,
            "usage_discrepancy": None,
        }
        # From here the request holds a reservation: a client that goes away cancels the rest
        # (not before: a reservation committed by a cancelled thread hop would never be released).
        watch = DisconnectWatch(request.receive)
        handed_off = False
        try:
            response = await self._dispatch(parsed, reservation, receipt, request_id, watch)
            handed_off = isinstance(response, Relay)
            return response
        except oe.OpenAIError as exc:
            receipt["error"] = exc.message
            raise
        except asyncio.CancelledError:
            if not watch.absorb():
                raise
            # Before the worker answered: its request is closed, nothing is billed.
            receipt["error"] = "client disconnected before the answer"
            receipt["cost"], receipt["status"] = 0, "failed"
            return Response(b"", CLIENT_CLOSED)
        finally:
            if not handed_off:  # a streamed answer writes its own receipt when it ends
                watch.close()
                state.settle_later(reservation, receipt)

    async def _dispatch(
        self, parsed: wire.ParsedRequest, reservation: store.Reservation,
        receipt: dict[str, Any], request_id: str, watch: DisconnectWatch,
    ) -> Response:
        state = self.state
        router = state.router
        path = {"chat": "/v1/chat/completions", "text": "/v1/completions",
                "embeddings": "/v1/embeddings"}[parsed.kind]
        payload = orjson.dumps(parsed.body)
        tried: list[str] = []
        last_error = ""
        for _attempt in range(2):  # a failure before the first byte is retried once elsewhere
            worker = router.pick(parsed.model, state.clock(), exclude=tried)
            if worker is None:
                if tried:
                    raise oe.upstream_failed(last_error)
                if not router.serves(parsed.model):
                    raise oe.model_not_found(parsed.model)
                raise oe.no_worker(parsed.model, state.fields.no_worker_retry_after_s)
            tried.append(worker.worker_id)
            receipt["operator"], receipt["worker"] = worker.operator, worker.worker_id
            worker.inflight += 1
            try:
                upstream = await self._send(worker, path, payload, request_id)
            except Upstream as exc:
                worker.inflight -= 1
                router.failed(worker, state.clock())
                last_error = str(exc)
                continue
            except BaseException:
                worker.inflight -= 1
                raise
            headers = {"X-Net-Operator": worker.operator}
            if parsed.stream and upstream.status < 400:
                return Relay(self, upstream, worker, parsed, reservation, receipt, watch)
            try:
                body = await read_answer(upstream, state.fields.upstream_max_body_bytes)
            except OverLimit as exc:
                router.failed(worker, state.clock())
                raise oe.upstream_failed(str(exc)) from None
            except UPSTREAM_ERRORS as exc:
                router.failed(worker, state.clock())
                raise oe.upstream_failed(f"reading the answer: {type(exc).__name__}") from None
            finally:
                worker.inflight -= 1
            if upstream.status >= 400:  # the engine refused the request itself: relay it
                router.succeeded(worker)
                receipt["error"] = f"engine answered {upstream.status}"
                return Response(body, upstream.status, headers=headers, media_type=JSON)
            doc = _json(body)
            if not isinstance(doc, dict):
                # Every answer of the OpenAI API is a JSON object: anything else (a cut-off
                # body, a page of HTML) is a failed worker, not an answer to bill.
                router.failed(worker, state.clock())
                raise oe.upstream_failed(f"the worker's answer ({len(body)} bytes) is not a"
                                         " JSON object")
            router.succeeded(worker)
            self._bill(parsed, receipt, _usage_of(doc), functools.partial(usage.answer_words, doc))
            return Response(body, 200, headers=headers, media_type=JSON)
        raise oe.upstream_failed(last_error)

    async def _send(
        self, worker: Worker, path: str, payload: bytes, request_id: str
    ) -> aiohttp.ClientResponse:
        """The worker's answer, its status and headers read (the body not yet)."""
        client = self.state.client
        assert client is not None
        try:
            response = await client.post(
                worker.endpoint + path, data=payload,
                headers={"Content-Type": JSON, "X-Request-Id": request_id,
                         "Authorization": worker.auth},
            )
        except UPSTREAM_ERRORS as exc:
            raise Upstream(f"{type(exc).__name__} from {worker.endpoint}") from None
        # 401/403: the endpoint does not hold this worker's token (another operator's worker,
        # or one restarted and not yet announced): a failure of this worker, not the client's.
        if response.status >= 500 or response.status in (401, 403):
            response.close()
            raise Upstream(f"{worker.endpoint} answered {response.status}")
        return response

    def _bill(
        self, parsed: wire.ParsedRequest, receipt: dict[str, Any], reported: tuple[Any, Any],
        relayed: Callable[[], int],
    ) -> None:
        """Bill the worker's usage if it is within bounds, else the gateway's own count
        (``relayed``: the output it relayed) and record the discrepancy."""
        billed = usage.bill(
            *reported, input_bound=parsed.max_input_tokens, output_bound=parsed.max_output_tokens,
            count=lambda: (usage.prompt_words(parsed.kind, parsed.body), relayed()))
        self._charge(parsed, receipt, billed.input_tokens, billed.output_tokens)
        receipt["usage_discrepancy"] = billed.discrepancy
        receipt["status"] = "ok"

    def _charge(self, parsed: wire.ParsedRequest, receipt: dict[str, Any], input_tokens: int,
                output_tokens: int) -> None:
        receipt["input_tokens"], receipt["output_tokens"] = input_tokens, output_tokens
        price = self.state.price(parsed.model)
        # Both counts are within the reservation's bounds: this only guards the arithmetic.
        receipt["cost"] = max(0, min(price.cost(input_tokens, output_tokens),
                                     price.cost(parsed.max_input_tokens,
                                                parsed.max_output_tokens)))

    # --- the rest of the OpenAI API --------------------------------------------------------
    async def _require_key(self, request: Request) -> str:
        key = _bearer(request)
        if not await asyncio.to_thread(store.key_exists, self.state.engine, key):
            raise oe.invalid_api_key()
        return key

    async def models(self, request: Request) -> Response:
        try:
            await self._require_key(request)
        except oe.OpenAIError as exc:
            return error_response(exc)
        live = self.state.router.live_models(self.state.clock())
        data = [
            {"id": model, "object": "model", "created": 0, "owned_by": "net-operators",
             "workers": len(ws), "test_mode": True}
            for model, ws in sorted(live.items())
        ]
        return Response(orjson.dumps({"object": "list", "data": data, "test_mode": True}),
                        media_type=JSON)

    async def usage(self, request: Request) -> Response:
        try:
            key = _bearer(request)
            doc = await asyncio.to_thread(store.usage, self.state.engine, key)
            if doc is None:
                raise oe.invalid_api_key()
        except oe.OpenAIError as exc:
            return error_response(exc)
        return Response(orjson.dumps({**doc, "test_mode": True}), media_type=JSON)

    # --- workers ---------------------------------------------------------------------------
    async def _payload(self, request: Request) -> Any:
        raw = await request.body()
        if len(raw) > 64 * 1024:
            raise oe.too_large(64 * 1024)
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise oe.OpenAIError(400, "the body must be JSON", code="invalid_json") from None

    async def announce(self, request: Request) -> Response:
        """Admission: a signed, fresh announcement of an operator registered on chain with at
        least MinStake, for an endpoint the deployment allows, within the operator's worker cap.
        Anything else is refused before the endpoint is stored or contacted. The answer carries
        the worker's own token (worker_token.py)."""
        state = self.state
        fields = state.fields
        try:
            payload = await self._payload(request)
            problem = verify_announce(payload, expected_genesis_hash=state.genesis_hash,
                                      now=time.time(), max_skew_s=fields.announce_max_skew_s)
            if problem:
                raise oe.OpenAIError(400, f"announcement refused: {problem}",
                                     param="announcement", code="invalid_announcement")
            try:
                refused = await state.admission(payload["operator"])
            except ChainUnavailable:
                raise oe.OpenAIError(503, "the gateway cannot read the chain to check the"
                                     " operator's registration; retry",
                                     type_="server_error", code="chain_unavailable",
                                     retry_after=fields.no_worker_retry_after_s) from None
            if refused:
                raise oe.OpenAIError(
                    403, f"announcement refused: {refused} (operator {payload['operator']},"
                    f" genesis {state.genesis_hash}): register with OperatorStake.register and"
                    " a stake of at least MinStake first", param="operator",
                    code="operator_not_admitted")
            problem = await endpoint_problem(payload["endpoint"],
                                             allow_private=fields.allow_private_endpoints)
            if problem:
                raise oe.OpenAIError(403, f"announcement refused: {problem}", param="endpoint",
                                     code="endpoint_not_allowed")
            try:
                worker_id = await state.write(functools.partial(
                    store.save_worker, state.engine, payload, time.time(),
                    max_per_operator=fields.max_workers_per_operator,
                    ttl_s=fields.worker_ttl_s))
            except store.TooManyWorkers as exc:
                raise oe.OpenAIError(
                    403, f"announcement refused: operator {payload['operator']} already has"
                    f" {exc.count} live workers, the cap (max_workers_per_operator); stop one"
                    f" and wait {fields.worker_ttl_s:g} s (worker_ttl_s) for it to expire",
                    param="endpoint", code="too_many_workers") from None
        except oe.OpenAIError as exc:
            return error_response(exc)
        await state.refresh_registry()
        worker = state.router.workers.get(worker_id)
        reason = "not loaded" if worker is None else state.router.why_not(worker, state.clock())
        return Response(orjson.dumps({
            "worker_id": worker_id, "accepted": True, "eligible": reason is None,
            "reason": reason, "worker_token": state.worker_token(worker_id),
        }), media_type=JSON)

    async def heartbeat(self, request: Request) -> Response:
        state = self.state
        try:
            payload = await self._payload(request)
            if not verify_heartbeat_payload(payload, state.genesis_hash):
                raise oe.OpenAIError(
                    400, "heartbeat refused: not a net-heartbeat-v1 payload signed by its"
                    " operator for this network's genesis", param="heartbeat",
                    code="invalid_heartbeat")
            current = state.router.chain.current_epoch
            if current is None or payload["epoch"] > current:
                # The worker may have seen the new epoch before this gateway's next poll.
                await state.poll_chain()
                current = state.router.chain.current_epoch
            if current is None:
                raise oe.OpenAIError(503, "the gateway cannot read the chain's epoch; retry",
                                     type_="server_error", code="chain_unavailable",
                                     retry_after=state.fields.no_worker_retry_after_s)
            # A future epoch would keep an operator alive after it stops; the past is stale.
            if payload["epoch"] > current or payload["epoch"] < current - 1:
                raise oe.OpenAIError(
                    409, f"heartbeat epoch {payload['epoch']} is not the current epoch"
                    f" ({current}) or the one before; sign one for epoch {current}",
                    param="epoch", code="wrong_epoch")
        except oe.OpenAIError as exc:
            return error_response(exc)
        epoch = await state.write(store.save_heartbeat, state.engine, payload, time.time())
        state.router.heartbeat(payload["operator"], epoch)
        return Response(orjson.dumps({"operator": payload["operator"], "epoch": epoch,
                                      "accepted": True}), media_type=JSON)

    def _rows(self, operator: str | None = None) -> list[dict[str, Any]]:
        state = self.state
        now = state.clock()
        rows = []
        for w in state.router.workers.values():
            if operator is not None and w.operator != operator:
                continue
            reason = state.router.why_not(w, now)
            rows.append({"operator": w.operator, "models": list(w.models),
                         "capacity": w.capacity, "inflight": w.inflight,
                         "live": reason is None, "reason": reason,
                         "heartbeat_epoch": state.router.heartbeats.get(w.operator)})
        return rows

    async def own_workers(self, request: Request) -> Response:
        """The signing operator's own workers, nobody else's (the edge hides the full list)."""
        state = self.state
        try:
            payload = await self._payload(request)
            problem = verify_view_request(payload, expected_genesis_hash=state.genesis_hash,
                                          now=time.time(),
                                          max_skew_s=state.fields.announce_max_skew_s)
            if problem:
                raise oe.OpenAIError(401, f"worker view refused: {problem}",
                                     param="view_request", code="invalid_view_request")
        except oe.OpenAIError as exc:
            return error_response(exc)
        return Response(orjson.dumps({
            "operator": payload["operator"], "current_epoch": state.router.chain.current_epoch,
            "workers": self._rows(payload["operator"]), "test_mode": True,
        }), media_type=JSON)

    async def workers(self, request: Request) -> Response:
        """Every known worker and why it does (not) take traffic; no endpoints or secrets.
        For the monitoring on loopback and the private network: the edge does not proxy it."""
        state = self.state
        rows = self._rows()
        live = {m: len(ws) for m, ws in state.router.live_models(state.clock()).items()}
        return Response(orjson.dumps({
            "genesis_hash": state.genesis_hash, "current_epoch": state.router.chain.current_epoch,
            "chain_error": state.chain_error, "live_workers_per_model": live, "workers": rows,
            "test_mode": True,
        }), media_type=JSON)


class Relay:
    """A streamed answer relayed to the client as plain ASGI, chunk by chunk: complete events
    pass through as the worker sent them (only the usage chunk the client did not ask for is
    dropped). Whatever the request holds (the worker's slot, its upstream connection, the budget
    reservation) is released in this response's own ``finally``, exactly once: after ``[DONE]``,
    after a worker failure or a worker over a limit (an error event ends the stream, no
    ``[DONE]``, nothing billed), and when the client disconnects (billed for the chunks it was
    sent: the gateway's own count, as no usage came)."""

    def __init__(self, api: GatewayApi, upstream: aiohttp.ClientResponse, worker: Worker,
                 parsed: wire.ParsedRequest, reservation: store.Reservation,
                 receipt: dict[str, Any], watch: DisconnectWatch) -> None:
        self.api, self.upstream, self.worker, self.watch = api, upstream, worker, watch
        self.parsed, self.reservation, self.receipt = parsed, reservation, receipt
        self.headers = [*SSE_HEADERS, (b"x-net-operator", worker.operator.encode())]

    async def __call__(self, scope: Any, receive: Receive, send: Send) -> None:
        state, receipt, worker = self.api.state, self.receipt, self.worker
        fields = state.fields
        tally = StreamTally()
        splitter = EventSplitter(fields.upstream_max_line_bytes)
        skip_usage = not self.parsed.client_wants_usage
        clean = False
        size, limit = 0, fields.upstream_max_body_bytes
        watch = self.watch
        watch.follow()  # the task that runs the response (the handler's, under uvicorn)
        try:
            await send(start_message(200, self.headers))
            async for chunk in self.upstream.content.iter_any():
                events = splitter.feed(chunk)  # (one line over its limit raises first)
                size += len(chunk)
                if size > limit:
                    raise OverLimit(f"the stream passed the limit of {limit} bytes")
                out = []
                content = 0
                for event in events:
                    if event == DONE:
                        tally.done = True
                        continue
                    if classify(event, tally):
                        if skip_usage:
                            continue
                    else:
                        content += 1
                    out.append(event + b"\n\n")
                if out:
                    await send(body_message(b"".join(out), True))
                    tally.relayed += content  # only what the client was sent is billed
            if not tally.done:
                raise aiohttp.ClientPayloadError("the stream ended without [DONE]")
            state.router.succeeded(worker)
            self.api._bill(self.parsed, receipt, (tally.prompt_tokens, tally.completion_tokens),
                           lambda: tally.relayed)
            clean = True
            watch.close()
            await send(body_message(DONE + b"\n\n", False))
        except (*UPSTREAM_ERRORS, OverLimit, LineTooLong) as exc:
            state.router.failed(worker, state.clock())
            why = str(exc) if isinstance(exc, OverLimit | LineTooLong) else type(exc).__name__
            receipt["error"] = f"worker failed mid-stream after {tally.relayed} chunks: {why}"
            receipt["output_tokens"], receipt["cost"], receipt["status"] = 0, 0, "failed"
            watch.close()
            await send(body_message(error_event(receipt["error"]), False))
        except asyncio.CancelledError:
            if not watch.absorb():
                raise
            # The client went away: it pays for the chunks it was sent (no usage came yet, so
            # the gateway's count: the prompt's words and one token a chunk).
            receipt["error"] = f"client disconnected after {tally.relayed} chunks"
            if tally.relayed:
                parsed = self.parsed
                self.api._charge(parsed, receipt, usage.prompt_words(parsed.kind, parsed.body),
                                 min(tally.relayed, parsed.max_output_tokens))
                receipt["status"] = "partial"
        finally:
            watch.close()
            worker.inflight -= 1
            if clean:
                self.upstream.release()  # read to the end: the connection goes back to the pool
            else:
                self.upstream.close()  # tells the worker (and its engine) to stop
            state.settle_later(self.reservation, receipt)


def _rejection(rejected: store.KeyRejected) -> oe.OpenAIError:
    if rejected.reason == "invalid":
        return oe.invalid_api_key()
    if rejected.reason == "budget":
        return oe.budget_exhausted(rejected.retry_after)
    what = "requests" if rejected.reason == "rpm" else "tokens"
    return oe.rate_limited(what, rejected.limit, rejected.retry_after)


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


def _usage_of(doc: Any) -> tuple[Any, Any]:
    """The worker's (prompt_tokens, completion_tokens) as it sent them, unchecked (embeddings
    have no completion tokens)."""
    found = doc.get("usage") if isinstance(doc, dict) else None
    if not isinstance(found, dict):
        return None, None
    return found.get("prompt_tokens"), found.get("completion_tokens", 0)

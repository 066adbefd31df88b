"""What onboarding and status ask the gateway: its view of the workers, and a test request."""

from __future__ import annotations

import concurrent.futures
import math
import time
from dataclasses import dataclass
from typing import Any

import httpx
from substrateinterface import Keypair

from ops_tools.chain.wire.worker_view_request import sign_view_request
from ops_tools.errors import OpsError

# The longest a burst of test requests that no worker took waits on the gateway's Retry-After:
# 20 rounds stay within minutes.
MAX_PAUSE_S = 5.0


def worker_view(gateway_url: str, keypair: Keypair, genesis_hash: str,
                timeout: float = 10) -> dict[str, Any] | None:
    """The gateway's row for the operator's own worker, None when unknown.

    Asked with a request signed by the operator's key (``POST /v1/workers/mine``): the gateway
    shows a worker to its operator only, and the full list is not reachable through the edge.
    """
    url = f"{gateway_url}/v1/workers/mine"
    request = sign_view_request(keypair, timestamp=int(time.time()), genesis_hash=genesis_hash)
    try:
        response = httpx.post(url, json=request, timeout=timeout)
        if response.status_code in (400, 401):
            message = response.json().get("error", {}).get("message", response.text[:200])
            raise OpsError(f"gateway {url}: {message}; check --gateway-url (the gateway of"
                           " this network) and this machine's clock")
        response.raise_for_status()
        body = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise OpsError(f"gateway {url}: {exc}; check --gateway-url") from None
    rows = body.get("workers", [])
    if not rows:
        return None
    row = next((w for w in rows if w.get("live")), rows[0])
    return {**row, "current_epoch": body.get("current_epoch")}


@dataclass
class Answer:
    operator: str | None
    status: int
    request_id: str | None
    text: str
    retry_after_s: float = 0.0


def _chat(client: httpx.Client, url: str, key: str, model: str) -> Answer:
    response = client.post(
        f"{url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {key}"},
        json={"model": model, "max_tokens": 16,
              "messages": [{"role": "user", "content": "onboarding test request"}]},
    )
    text = ""
    if response.status_code == 200:
        text = response.json()["choices"][0]["message"]["content"]
    return Answer(response.headers.get("x-net-operator"), response.status_code,
                  response.headers.get("x-request-id"), text or response.text[:200],
                  _retry_after(response.headers.get("retry-after")))


def _retry_after(value: str | None) -> float:
    """The gateway's Retry-After in seconds, within [0, MAX_PAUSE_S]; 0 when absent or not a
    number of seconds."""
    try:
        seconds = float(value or 0)
    except ValueError:
        return 0.0
    return min(max(seconds, 0.0), MAX_PAUSE_S) if math.isfinite(seconds) else 0.0


def request_served_by(gateway_url: str, key: str, model: str, operator: str, *,
                      rounds: int = 20, burst: int = 4, timeout_s: float = 60) -> Answer:
    """A chat completion through the gateway that ``operator``'s worker answered.

    The gateway picks the least busy live worker (ties to the one it knew first), so a single
    request may go to another operator's idle worker: requests are sent in small concurrent
    bursts, which spread over the live workers, until one is answered by ours. ``timeout_s``
    bounds each request: a CPU engine answers a burst one request after the other. A burst
    that no worker answered waits the gateway's ``Retry-After`` (at most ``MAX_PAUSE_S``).
    """
    seen: list[str] = []
    with httpx.Client(timeout=timeout_s) as client, \
            concurrent.futures.ThreadPoolExecutor(burst) as pool:
        for _ in range(rounds):
            answers = list(pool.map(lambda _i: _chat(client, gateway_url, key, model),
                                    range(burst)))
            for answer in answers:
                if answer.status == 200 and answer.operator == operator:
                    return answer
                seen.append(f"{answer.status} from {answer.operator}")
            if not any(answer.status == 200 for answer in answers):
                # No worker took the burst (503 while ours cools down after failed requests):
                # the next one right away would spend the rounds within the cool-down.
                time.sleep(max(answer.retry_after_s for answer in answers) or 1.0)
    raise OpsError(f"daemon: {rounds * burst} test requests through the gateway {gateway_url}"
                   f" were none answered by {operator}'s worker (last: {seen[-1]}); check the"
                   " worker's log")

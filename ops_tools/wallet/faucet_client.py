"""Asking the network's faucet for tokens: ``POST {faucet_url}/drip-public``.

Resolution: ``--faucet-url`` > ``$NET_FAUCET_URL`` > ``http://127.0.0.1:8001`` (the local
network's faucet). The faucet's refusals already say what and when; they are passed on as the
one error line, with the wait of a rate limit.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from ops_tools.errors import InputError, OpsError

DEFAULT_FAUCET_URL = "http://127.0.0.1:8001"
FAUCET_ENV = "NET_FAUCET_URL"


class FaucetRefusal(OpsError):
    """The faucet answered with an error; ``body`` is its JSON error object."""

    def __init__(self, message: str, status: int, body: dict[str, Any]) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


def resolve_faucet_url(flag: str | None, env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    if flag:
        url, source = flag, "--faucet-url"
    elif env.get(FAUCET_ENV):
        url, source = env[FAUCET_ENV], FAUCET_ENV
    else:
        url, source = DEFAULT_FAUCET_URL, "default"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(
            f"{source}: {url!r} is not a faucet URL; use http://HOST:PORT or https://HOST"
        )
    try:
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError as exc:
        raise InputError(f"{source}: {url!r} has an invalid port; use http://HOST:PORT") from exc
    return url.rstrip("/")


def request_drip(url: str, recipient: str, timeout: float) -> dict[str, Any]:
    """The faucet's success object; ``FaucetRefusal`` or ``OpsError`` with one line otherwise."""
    body = json.dumps({"recipient": recipient}).encode()
    request = urllib.request.Request(  # noqa: S310 - http(s) only, checked by resolve_faucet_url
        f"{url}/drip-public",
        data=body,
        headers={"Content-Type": "application/json", "Accept": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:  # noqa: S310
            return json.load(resp)
    except urllib.error.HTTPError as exc:
        raise _refusal(url, exc) from None
    except TimeoutError:
        raise OpsError(
            f"faucet {url}: no answer within {timeout:g} s; the drip may still arrive, check"
            " with wallet-cli balance before asking again"
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise OpsError(
            f"faucet {url} unreachable ({reason}); check the URL or set --faucet-url /"
            f" {FAUCET_ENV}"
        ) from None
    except json.JSONDecodeError:
        raise OpsError(f"faucet {url}: the answer is not JSON; is this the faucet's URL?") from None


def _refusal(url: str, exc: urllib.error.HTTPError) -> OpsError:
    try:
        payload = json.loads(exc.read() or b"{}")
    except (json.JSONDecodeError, OSError):
        payload = {}
    error = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(error, dict):
        return OpsError(f"faucet {url}: HTTP {exc.code} without an error object")
    message = f"faucet refused ({exc.code} {error.get('code', 'error')}): {error.get('message')}"
    retry = exc.headers.get("Retry-After") if exc.headers else None
    if retry and "next_drip_at" not in error:  # a limit's message already says when
        message += f"; retry after {retry} s"
    return FaucetRefusal(message, exc.code, error)

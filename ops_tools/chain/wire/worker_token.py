"""The credential the gateway sends one worker: bound to that worker, useless at any other.

``token = "nwt-" || hex(HMAC-SHA256(key, tag || genesis hash || worker id))``, where the worker id
is ``<operator ss58>@<endpoint>`` and the key never leaves the gateway (every instance of one
network shares it, so each derives the same token). The gateway returns the token only in the
answer to a verified, admitted announcement of that worker, which only its operator's key can
sign; the worker then accepts inference requests bearing exactly that token. So a token seen by
an announced endpoint (or captured from one worker) opens only that worker: another operator's
worker, or the same operator's at another endpoint, holds a different one. Health checks carry
no token.
"""

from __future__ import annotations

import hashlib
import hmac

TAG = b"net-worker-token-v1"
PREFIX = "nwt-"
MAX_LEN = 128  # what a worker accepts from the gateway's answer


def worker_token(key: bytes, genesis_hash: str, worker_id: str) -> str:
    message = TAG + genesis_hash.lower().encode() + b"\0" + worker_id.encode()
    return PREFIX + hmac.new(key, message, hashlib.sha256).hexdigest()

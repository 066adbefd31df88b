"""A worker's answers as the gateway takes them: whole and within a bound (a hostile worker
cannot make the gateway buffer more), and each on a connection that carries only the answer to
its own request (nothing a worker sent before the request can be taken for its answer)."""

from __future__ import annotations

from typing import Any

import aiohttp


class OverLimit(Exception):
    """A worker's answer went over a configured size limit: 502, nothing billed, a failure."""


async def read_bounded(upstream: aiohttp.ClientResponse, limit: int) -> bytes:
    """The whole body, or ``OverLimit`` as soon as it passes ``limit`` bytes.

    Never ``upstream.content.read(n)``: that returns only what has arrived so far."""
    length = upstream.content_length
    if length is not None:
        if length > limit:
            raise OverLimit(f"the worker's answer is {length} bytes; the limit is {limit}")
        return await upstream.read()  # aiohttp reads exactly Content-Length bytes
    parts, size = [], 0
    async for chunk in upstream.content.iter_any():
        size += len(chunk)
        if size > limit:
            raise OverLimit(f"the worker's answer passed the limit of {limit} bytes")
        parts.append(chunk)
    return b"".join(parts)


async def read_answer(upstream: aiohttp.ClientResponse, limit: int) -> bytes:
    """``read_bounded``, and the connection back to the pool only when the answer was read to
    its end: after a failure (over the limit, cut off, timed out) it is closed, so nothing the
    worker sent after the point where the gateway stopped reading can be taken for the answer
    to a later request on that connection."""
    try:
        body = await read_bounded(upstream, limit)
    except BaseException:
        upstream.close()
        raise
    upstream.release()
    return body


class CleanPoolConnector(aiohttp.TCPConnector):
    """A pooled connection is reused only when nothing arrived on it while it sat idle.

    aiohttp parses what comes in on an idle pooled connection and queues it, and the next
    request on that connection takes the queued response for its own: a worker could send an
    answer nobody asked for after an aborted (or any) answer and have it taken as the answer to
    a later request, read before that request was even sent. Such a connection is closed here
    and another one taken (or a new one made)."""

    async def connect(self, req: aiohttp.ClientRequest, *args: Any, **kwargs: Any) -> Any:
        while True:
            conn = await super().connect(req, *args, **kwargs)
            protocol = conn.protocol
            # should_close: a queued response, unread bytes, a body not read to its end.
            if protocol is None or not protocol.should_close:
                return conn
            conn.close()

"""A HOSTILE engine, as its own process on loopback: behind a real ``net-worker`` (which relays
what its engine sends as it is), it is a hostile worker as the gateway sees it. The model name
picks the attack:

- ``lie-negative``, ``lie-huge`` (2**63), ``lie-float``, ``lie-string``: a normal three-word
  answer whose usage lies (streamed too, the lie in the usage chunk);
- ``huge-body``: a 2 MiB answer, its first 4 KiB at once and the rest 0.5 s later (as a busy
  engine's answer arrives: the worker must relay it whole, not what came first); streamed, one
  2 MiB event line;
- ``not-json``: a 200 whose body is the first half of an answer (not JSON);
- ``drip``: a stream of valid chunks, one every 0.3 s, forever;
- ``silent``: accepts the request and never answers.

    python -m tests.services.gateway.hostile_engine --port P
"""

from __future__ import annotations

import argparse
import asyncio
import json

from aiohttp import web

LIES = {"lie-negative": -1_000_000_000, "lie-huge": 2**63, "lie-float": 1.5, "lie-string": "7"}
MODELS = [*LIES, "huge-body", "not-json", "drip", "silent"]
ANSWER = "one two three"


def _chunk(content: str | None, usage: dict | None = None) -> bytes:
    choices = [] if content is None else [{"index": 0, "delta": {"content": content}}]
    doc = {"id": "hostile", "object": "chat.completion.chunk", "model": "m", "choices": choices,
           "usage": usage}
    return b"data: " + json.dumps(doc).encode() + b"\n\n"


async def _stream(request: web.Request, model: str) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    if model == "huge-body":
        await response.write(b"data: " + b"x" * (2 * 1024 * 1024) + b"\n\n")
    elif model == "drip":
        while True:
            await response.write(_chunk("drip "))
            await asyncio.sleep(0.3)
    else:
        for word in ANSWER.split():
            await response.write(_chunk(word + " "))
        await response.write(_chunk(None, {"prompt_tokens": LIES[model], "completion_tokens": 3,
                                           "total_tokens": 0}))
        await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


async def completions(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    model = body["model"]
    if model == "silent":
        await asyncio.sleep(3600)
    if body.get("stream"):
        return await _stream(request, model)
    if model == "huge-body":
        whole = b'{"pad": "' + b"x" * (2 * 1024 * 1024) + b'"}'
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.content_length = len(whole)
        await response.prepare(request)
        await response.write(whole[:4096])
        await asyncio.sleep(0.5)
        await response.write(whole[4096:])
        await response.write_eof()
        return response
    if model == "not-json":
        return web.Response(body=b'{"id": "hostile", "object": "chat.completion", "choi',
                            content_type="application/json")
    doc = {"id": "hostile", "object": "chat.completion", "model": model,
           "choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER},
                        "finish_reason": "stop"}],
           "usage": {"prompt_tokens": LIES[model], "completion_tokens": 3}}
    return web.Response(body=json.dumps(doc).encode(), content_type="application/json")


async def models(request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [
        {"id": m, "object": "model", "created": 0, "owned_by": "hostile"} for m in MODELS]})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/v1/models", models)
    # A held request (``silent``) must not delay the stop: no graceful wait for it.
    web.run_app(app, host="127.0.0.1", port=args.port, print=None, shutdown_timeout=0.5)


if __name__ == "__main__":
    main()

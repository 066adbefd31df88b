"""TEST DOUBLES of the GPU engines (vLLM, SGLang, TensorRT-LLM), which cannot run here.

Each reproduces the documented HTTP surface the worker's adapter relies on, and nothing more:
- vLLM (``vllm serve``): ``/health`` (200 when the engine runs), ``/metrics`` in Prometheus text
  with ``vllm:num_requests_running`` / ``vllm:num_requests_waiting`` (one line per model label),
  a stream's usage chunk only with ``stream_options.include_usage``, errors as
  ``{"object": "error", "message", "type", "param", "code"}``.
- SGLang (``sglang.launch_server --enable-metrics``): ``/health_generate``, ``/get_model_info``
  (``{"model_path", "is_generation"}``), ``sglang:num_running_reqs`` / ``sglang:num_queue_reqs``,
  errors as vLLM's.
- TensorRT-LLM (``trtllm-serve``): ``/health``, ``/metrics`` as a JSON list of iteration
  statistics (``numActiveRequests``, ``numQueuedRequests``).
The generated text is fixed words, labelled as a double's; token counts are the words.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

WORDS = ["double", "says", "hello", "from", "the", "test", "double", "engine"]


@dataclass
class DoubleState:
    model: str = "double-model"
    healthy: bool = False
    running: int = 0
    waiting: int = 0
    lists_models: bool = True  # False: /v1/models lists nothing (only /get_model_info names it)
    seen: list[dict[str, Any]] = field(default_factory=list)


STATE = web.AppKey("state", DoubleState)


def _error(message: str, status: int) -> web.Response:
    body = {"object": "error", "message": message, "type": "BadRequestError", "param": None,
            "code": status}
    return web.json_response(body, status=status)


def _usage(body: dict[str, Any], n: int) -> dict[str, int]:
    prompt = len(str(body.get("prompt") or body.get("messages")).split())
    return {"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": prompt + n}


async def _completions(request: web.Request) -> web.StreamResponse:
    state: DoubleState = request.app[STATE]
    body = await request.json()
    state.seen.append(body)
    if body.get("model") != state.model:
        return _error(f"The model `{body.get('model')}` does not exist.", 404)
    n = min(int(body.get("max_tokens") or 4), len(WORDS))
    words = WORDS[:n]
    if not body.get("stream"):
        return web.json_response({"id": "cmpl-double", "object": "text_completion",
                                  "model": state.model,
                                  "choices": [{"index": 0, "text": " ".join(words),
                                               "finish_reason": "length"}],
                                  "usage": _usage(body, n)})
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for word in words:
        chunk = {"id": "cmpl-double", "object": "text_completion", "model": state.model,
                 "choices": [{"index": 0, "text": word + " ", "finish_reason": None}]}
        await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    if (body.get("stream_options") or {}).get("include_usage"):
        chunk = {"id": "cmpl-double", "object": "text_completion", "model": state.model,
                 "choices": [], "usage": _usage(body, n)}
        await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    await response.write(b"data: [DONE]\n\n")
    return response


async def _models(request: web.Request) -> web.Response:
    state: DoubleState = request.app[STATE]
    data = [{"id": state.model, "object": "model"}] if state.lists_models else []
    return web.json_response({"object": "list", "data": data})


async def _health(request: web.Request) -> web.Response:
    state: DoubleState = request.app[STATE]
    return web.Response(status=200 if state.healthy else 503)


def _prometheus(running: str, waiting: str):
    async def metrics(request: web.Request) -> web.Response:
        state: DoubleState = request.app[STATE]
        label = f'{{model_name="{state.model}"}}'
        text = (f"# HELP {running} Number of requests running.\n# TYPE {running} gauge\n"
                f"{running}{label} {float(state.running)}\n"
                f"# TYPE {waiting} gauge\n{waiting}{label} {float(state.waiting)}\n"
                f"other_metric_total{label} 7.0\n")
        return web.Response(text=text, content_type="text/plain")
    return metrics


async def _sglang_model_info(request: web.Request) -> web.Response:
    state: DoubleState = request.app[STATE]
    return web.json_response({"model_path": state.model, "is_generation": True})


async def _trtllm_metrics(request: web.Request) -> web.Response:
    state: DoubleState = request.app[STATE]
    stats = [{"iter": 1, "numActiveRequests": 0, "numQueuedRequests": 0, "gpuMemUsage": 1},
             {"iter": 2, "numActiveRequests": state.running,
              "numQueuedRequests": state.waiting, "gpuMemUsage": 1}]
    return web.json_response(stats)


def build(kind: str, state: DoubleState) -> web.Application:
    app = web.Application()
    app[STATE] = state
    app.router.add_post("/v1/completions", _completions)
    app.router.add_get("/v1/models", _models)
    if kind == "vllm":
        app.router.add_get("/health", _health)
        app.router.add_get("/metrics", _prometheus("vllm:num_requests_running",
                                                   "vllm:num_requests_waiting"))
    elif kind == "sglang":
        app.router.add_get("/health_generate", _health)
        app.router.add_get("/get_model_info", _sglang_model_info)
        app.router.add_get("/metrics", _prometheus("sglang:num_running_reqs",
                                                   "sglang:num_queue_reqs"))
    elif kind == "trtllm":
        app.router.add_get("/health", _health)
        app.router.add_get("/metrics", _trtllm_metrics)
    return app


async def serve(kind: str, state: DoubleState) -> tuple[web.AppRunner, str]:
    """The double on 127.0.0.1, on a port the OS picks; (runner to clean up, base URL)."""
    runner = web.AppRunner(build(kind, state))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"

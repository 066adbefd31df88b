"""vLLM (``vllm serve``): ``/health`` is 200 once the engine runs; load from ``/metrics``
(``vllm:num_requests_running``, ``vllm:num_requests_waiting``); a stream carries usage only when
asked with ``stream_options.include_usage`` (the gateway always asks); errors are
``{"object": "error", "message", "type", "code"}``."""

from __future__ import annotations

from ops_tools.worker.engines.base import EngineLoad, HttpEngine


class VllmEngine(HttpEngine):
    kind = "vllm"
    name = "vllm"

    async def ready(self) -> str | None:
        return await self._health("/health")

    async def load(self) -> EngineLoad | None:
        return await self._prometheus_load("vllm:num_requests_running",
                                           "vllm:num_requests_waiting")

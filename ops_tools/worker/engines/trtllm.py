"""TensorRT-LLM (``trtllm-serve``): ``/health`` is 200 once the executor runs; ``/metrics`` is
not Prometheus text but a JSON list of the latest iterations' statistics, of which the newest
counts (``numActiveRequests``, ``numQueuedRequests``; an empty list: no iteration ran since the
last read, the engine is idle); errors as vLLM's."""

from __future__ import annotations

from typing import Any

from ops_tools.worker.engines.base import EngineLoad, HttpEngine


def _count(stats: dict[str, Any], key: str) -> int | None:
    value = stats.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class TrtLlmEngine(HttpEngine):
    kind = "trtllm"
    name = "tensorrt-llm"

    async def ready(self) -> str | None:
        return await self._health("/health")

    async def load(self) -> EngineLoad | None:
        stats = await self._get_json("/metrics")
        if not isinstance(stats, list):
            return None
        if not stats:
            return EngineLoad(0, 0)
        newest = stats[-1]
        if not isinstance(newest, dict):
            return None
        running = _count(newest, "numActiveRequests")
        waiting = _count(newest, "numQueuedRequests")
        return None if running is None else EngineLoad(running, waiting or 0)

"""SGLang (``sglang.launch_server``): ``/health_generate`` runs one token through the model, so a
wedged scheduler is unready even while the HTTP side answers (``/health`` would not show it);
``/get_model_info`` names the served model; load from ``/metrics`` with ``--enable-metrics``
(``sglang:num_running_reqs``, ``sglang:num_queue_reqs``); errors as vLLM's."""

from __future__ import annotations

from ops_tools.worker.engines.base import EngineLoad, HttpEngine


class SGLangEngine(HttpEngine):
    kind = "sglang"
    name = "sglang"

    async def ready(self) -> str | None:
        return await self._health("/health_generate")

    async def models(self) -> list[str]:
        names = await super().models()
        if names:
            return names
        info = await self._get_json("/get_model_info")
        path = info.get("model_path") if isinstance(info, dict) else None
        return [path] if isinstance(path, str) and path else []

    async def load(self) -> EngineLoad | None:
        return await self._prometheus_load("sglang:num_running_reqs", "sglang:num_queue_reqs")

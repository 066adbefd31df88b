"""Where a worker's requests go: one adapter per engine dialect.

Every engine speaks the OpenAI API for inference; they differ in how they say they are ready,
where their load shows, how they report usage on a stream and what their error bodies look like.
Each dialect is a small module (vllm, sglang, trtllm, llamacpp, openai, test); ``make_engine``
picks one by ``engine_kind``.
"""

from __future__ import annotations

from pathlib import Path

from ops_tools.worker.config import ENGINE_KINDS
from ops_tools.worker.engines.base import ENGINE_KEEPALIVE_S, Answer, EngineLoad, HttpEngine
from ops_tools.worker.engines.front import Engine, EngineFront
from ops_tools.worker.engines.llamacpp import LlamaCppEngine
from ops_tools.worker.engines.openai import OpenAIEngine
from ops_tools.worker.engines.sglang import SGLangEngine
from ops_tools.worker.engines.test import TestEngine
from ops_tools.worker.engines.trtllm import TrtLlmEngine
from ops_tools.worker.engines.vllm import VllmEngine

_HTTP: dict[str, type[HttpEngine]] = {
    "vllm": VllmEngine, "sglang": SGLangEngine, "trtllm": TrtLlmEngine,
    "llamacpp": LlamaCppEngine, "openai": OpenAIEngine,
}

def make_engine(kind: str, url: str, models: list[str], token_delay_ms: int = 0,
                model_path: Path | None = None,
                keepalive_s: float = ENGINE_KEEPALIVE_S) -> Engine:
    if kind == "test":
        return TestEngine(models, token_delay_ms)
    if kind == "llamacpp":
        return LlamaCppEngine(url, model_path, keepalive_s)
    return _HTTP[kind](url, keepalive_s)


__all__ = ["ENGINE_KINDS", "Answer", "Engine", "EngineFront", "EngineLoad", "HttpEngine",
           "TestEngine", "make_engine"]

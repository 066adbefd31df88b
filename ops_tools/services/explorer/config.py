"""Configuration of ``net-explorer`` (environment prefix ``NET_EXPLORER_``)."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from ops_tools.services.common.settings import ServiceSettings


class ExplorerSettings(ServiceSettings):
    service_name = "explorer"

    # Where the reports come from: the attestation service's HTTP API (the explorer keeps no
    # database of its own, so it can run anywhere the API is reachable).
    attestation_url: str = "http://127.0.0.1:8002"
    page_size: int = Field(default=20, ge=1, le=100)
    # How long the list of registered operators read from the chain is reused.
    anchor_cache_s: float = Field(default=3.0, ge=0, le=600)
    upstream_timeout_s: float = Field(default=10.0, gt=0, le=120)

    @field_validator("attestation_url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not re.match(r"^https?://[^/\s]+", value):
            raise ValueError("expected the attestation service's http:// or https:// URL")
        return value.rstrip("/")

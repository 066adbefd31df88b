"""Configuration of both indexer programs (one YAML file serves the processor and the API)."""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import Field, field_validator

from ops_tools.services.common.settings import ServiceSettings
from ops_tools.services.indexer.limits import Limits

# Quoted as an identifier in GRANT (which takes no bind parameters): a strict shape, no quotes.
ROLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,62}")


class IndexerSettings(ServiceSettings):
    service_name: ClassVar[str] = "indexer"

    listen_port: int = Field(default=8004, ge=1, le=65535)
    # Processor
    batch_size: int = Field(default=100, ge=1, le=1000)
    fetch_ahead: int = Field(default=4, ge=1, le=32)
    poll_interval_s: float = Field(default=6.0, gt=0, le=600)
    # API
    ready_max_lag: int = Field(default=5, ge=0, description="blocks behind the chain's best")
    max_depth: int = Field(default=10, ge=2, le=50)
    max_page_size: int = Field(default=100, ge=1, le=1000)
    default_page_size: int = Field(default=20, ge=1, le=1000)
    max_cost: int = Field(default=20_000, ge=10)
    # Each read of a request (its SQL statements) stops after this: the cost and the index
    # rules bound what a query asks for, this bounds what the database makes of it.
    query_timeout_s: float = Field(default=5.0, gt=0, le=300)
    max_subscriptions_per_connection: int = Field(default=10, ge=1, le=1000)
    max_subscriptions_per_address: int = Field(default=50, ge=1, le=100_000)
    subscription_max_backlog: int = Field(
        default=1000, ge=1, le=1_000_000,
        description="blocks a subscriber may fall behind before it is dropped")
    subscription_send_timeout_s: float = Field(
        default=10.0, gt=0, le=300,
        description="seconds a message to a subscriber may wait to be sent (its connection's "
                    "buffer full: the client does not read) before the subscriber is dropped")
    graphql_ide: bool = Field(default=True, description="GraphiQL on GET /graphql")
    introspection: bool = Field(default=True, description="__schema and __type queries")
    count_cap: int = Field(default=10_000, ge=1, le=1_000_000,
                           description="rows totalCount walks at most")
    # PostgreSQL: the role the API connects as, to which the processor (the tables' owner)
    # grants SELECT on the index at every start, so the API's role can read and never write.
    read_only_role: str | None = Field(default=None, max_length=63)

    @field_validator("read_only_role")
    @classmethod
    def _role(cls, value: str | None) -> str | None:
        if value is not None and not ROLE_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not a PostgreSQL role name this service accepts: "
                             f"letters, digits, '_' and '-', starting with a letter or '_'")
        return value

    def step_stale_s(self) -> float:
        """How long without a processor step means it is stuck (every step records itself)."""
        return max(3 * self.poll_interval_s, 30.0)

    def limits(self) -> Limits:
        return Limits(max_depth=self.max_depth, max_page_size=self.max_page_size,
                      default_page_size=min(self.default_page_size, self.max_page_size),
                      max_cost=self.max_cost, count_cap=self.count_cap)

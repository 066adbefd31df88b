"""``net-gateway`` settings: the platform's common fields and the gateway's own."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ops_tools.services.common.settings import ServiceSettings
from ops_tools.services.gateway.pricing import Price


class ModelPrice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input_per_1k: int = Field(ge=0, description="plancks per 1,000 input tokens")
    output_per_1k: int = Field(ge=0, description="plancks per 1,000 output tokens")

    def price(self) -> Price:
        return Price(self.input_per_1k, self.output_per_1k)


class GatewaySettings(ServiceSettings):
    service_name = "gateway"

    # OpenAI request bodies (long chats) are larger than the platform's default.
    max_body_bytes: int = Field(default=1024 * 1024, ge=256, le=64 * 1024 * 1024)
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    # Models a worker serves that have no entry in ``prices`` cost this.
    default_price: ModelPrice = ModelPrice(input_per_1k=1_000_000, output_per_1k=2_000_000)
    # The output cap added to requests that give none (the reserved maximum cost needs one).
    default_max_tokens: int = Field(256, ge=1)
    max_tokens_cap: int = Field(8192, ge=1)
    # The key each worker's own credential is derived from (worker_token.py). It never leaves
    # the gateway; every instance of one network needs the same.
    worker_secret_file: Path
    # The settlement account's secret URI, hex seed or mnemonic; no settlement without it.
    settlement_seed_file: Path | None = None
    # A key kept across restarts and resets (the local network's development key): created at
    # start when its hash is not on record, bound to ``dev_api_key_account``.
    dev_api_key_file: Path | None = None
    dev_api_key_account: str | None = None
    settle_interval_s: float = Field(30.0, gt=0)
    chain_poll_s: float = Field(2.0, gt=0)
    # How long the last good chain read is trusted while reads fail.
    chain_view_max_age_s: float = Field(20.0, gt=0)
    registry_refresh_s: float = Field(1.0, gt=0)
    health_interval_s: float = Field(5.0, gt=0)
    # Failed health checks in a row that take a worker out of routing (one passed check puts it
    # back).
    health_checks_before_down: int = Field(2, ge=1, le=100)
    failures_before_cooldown: int = Field(3, ge=1)
    cooldown_s: float = Field(30.0, ge=0)
    announce_max_skew_s: float = Field(120.0, gt=0)
    # Worker endpoints on loopback, private or link-local addresses (or names resolving to
    # them): refused unless true (a local network; never a public one).
    allow_private_endpoints: bool = False
    max_workers_per_operator: int = Field(4, ge=1, le=1000)
    # A worker not announced again within this time is forgotten (workers re-announce every
    # announce_interval_s, 15 s).
    worker_ttl_s: float = Field(60.0, gt=0)
    upstream_connect_timeout_s: float = Field(3.0, gt=0)
    # Silence from a worker: until its first byte, and between bytes.
    upstream_timeout_s: float = Field(300.0, gt=0)
    # The whole exchange with a worker, streams included (a slow drip ends here).
    upstream_total_timeout_s: float = Field(900.0, gt=0)
    # A worker's answer body (a whole stream too), and one server-sent-event line of a stream.
    upstream_max_body_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    upstream_max_line_bytes: int = Field(1024 * 1024, ge=256)
    # Usage a worker misreports (not billed as reported): after this many on one network, its
    # operator's workers take no traffic for ``misreport_exclusion_s`` after the latest one.
    misreports_before_exclusion: int = Field(3, ge=1)
    misreport_exclusion_s: float = Field(3600.0, ge=0)
    # Receipts of requests a gateway lost (crash, failed write) are closed and their
    # reservations released this long after the request's longest possible end.
    reconcile_interval_s: float = Field(30.0, gt=0)
    open_receipt_grace_s: float = Field(60.0, ge=0)
    # Every chain RPC call of the gateway: connecting and each call.
    chain_rpc_timeout_s: float = Field(5.0, gt=0, le=120)
    # Settlement transfers are mortal for this many blocks (a power of two, 4..65536): an
    # outcome that is unknown (connection lost after submission) is final once it expires.
    settle_era_period: int = Field(64, ge=4, le=65536)
    # How long one settlement run waits for a submitted transfer to show in a block.
    settle_wait_s: float = Field(30.0, gt=0)
    # A settlement claimed but never submitted (its run crashed) returns to pending after this.
    settle_claim_grace_s: float = Field(120.0, ge=0)
    no_worker_retry_after_s: int = Field(5, ge=1)

    @field_validator("settle_era_period")
    @classmethod
    def _power_of_two(cls, value: int) -> int:
        if value & (value - 1):
            raise ValueError(f"settle_era_period is {value}; a mortal era's period is a power"
                             " of two (4, 8, ..., 65536): pick the nearest")
        return value

"""The faucet's configuration: the platform's settings plus the drip, the signer and the limits.

Defaults are the testnet's strict ones; the local inventory loosens them (roles/faucet).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ops_tools.services.common.settings import Network, ServiceSettings

HOUR = 3600
DAY = 24 * HOUR
PLANCKS_PER_TOKEN = 10**12


class WindowLimit(BaseModel):
    """At most ``count`` drips per ``window_s`` seconds."""

    model_config = ConfigDict(extra="forbid")

    count: int = Field(ge=0, le=1_000_000)
    window_s: int = Field(ge=1, le=30 * DAY)


class LimitsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # One drip per recipient per window: the count is fixed at one on purpose.
    recipient_window_s: int = Field(default=DAY, ge=1, le=30 * DAY)
    per_ip: WindowLimit = WindowLimit(count=3, window_s=DAY)
    global_per_hour: int = Field(default=60, ge=0, le=1_000_000)
    # No drip to an account that already holds more than this (plancks).
    balance_cap_plancks: int = Field(default=100 * PLANCKS_PER_TOKEN, ge=0)
    # Clients in these networks skip the per-IP limit, never the per-recipient one.
    exempt_networks: list[Network] = []


class FaucetSettings(ServiceSettings):
    service_name: ClassVar[str] = "faucet"

    listen_port: int = Field(default=8001, ge=1, le=65535)
    max_body_bytes: int = Field(default=1024, ge=256, le=64 * 1024)
    # The signer's secret URI (mnemonic, 0x seed or a derivation such as //Faucet): a file
    # with mode 0600, else the environment variable NET_FAUCET_SEED. Never a plain setting.
    seed_file: Path | None = None
    # The key of the limits' hashes (addresses, IPs, idempotency keys): a file with mode 0600
    # given to every instance, else a salt kept in the shared database (created by the first
    # instance). Either way all instances on one database enforce one limit.
    salt_file: Path | None = None
    drip_plancks: int = Field(default=10 * PLANCKS_PER_TOKEN, gt=0)
    token_symbol: str = Field(default="NET", min_length=1, max_length=12)
    token_decimals: int = Field(default=12, ge=0, le=30)
    ss58_prefix: int = Field(default=42, ge=0, le=16383)
    limits: LimitsConfig = LimitsConfig()
    # How long a request waits for its drip to be in a block (and, streamed, finalized).
    inclusion_timeout_s: float = Field(default=60.0, gt=0, le=600)
    finality_timeout_s: float = Field(default=120.0, gt=0, le=1800)
    poll_interval_s: float = Field(default=0.25, gt=0, le=10)
    # How often the faucet's own balance is re-read for /ready and the metric.
    balance_refresh_s: float = Field(default=10.0, gt=0, le=3600)
    # Every chain request gives up after this long: a node that hangs fails requests instead
    # of holding them.
    rpc_timeout_s: float = Field(default=10.0, gt=0, le=120)
    # A submitted drip is followed (block, nonce, resent when its answer was lost) this long;
    # then it is recorded as unknown and no longer followed.
    ticket_ttl_s: float = Field(default=900.0, gt=0, le=DAY)
    # The signer's lease in the database: one instance signs per seed; renewed every third.
    signer_lease_s: float = Field(default=30.0, ge=3, le=3600)

    @model_validator(mode="after")
    def _ttl_covers_the_waits(self) -> FaucetSettings:
        if self.ticket_ttl_s < max(self.inclusion_timeout_s, self.finality_timeout_s):
            raise ValueError(
                f"ticket_ttl_s ({self.ticket_ttl_s:g}) must be at least inclusion_timeout_s and"
                f" finality_timeout_s ({max(self.inclusion_timeout_s, self.finality_timeout_s):g})")
        return self

    def legacy_salt_path(self) -> Path:
        """Where versions before the shared salt kept each instance's own."""
        return self.state_dir / "faucet.salt"

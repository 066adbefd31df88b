"""Configuration of ``net-attestation`` (environment prefix ``NET_ATTESTATION_``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ops_tools.services.common.settings import ServiceSettings


class AttestationSettings(ServiceSettings):
    service_name = "attestation"

    # The seed every key and certificate of the mock PKI is derived from (file, mode 0600).
    mock_root_seed_file: Path
    # This service exists only on the test network, whose quotes are mock quotes: its verifier
    # accepts the mock root unless told not to. The pure verifier has no default.
    accept_mock_root: bool = True
    report_ttl_s: int = Field(default=7 * 24 * 3600, ge=60, le=365 * 24 * 3600)
    # A report with eight GPUs is about 50 KiB of JSON, and /v1/verify takes one whole.
    max_body_bytes: int = Field(default=256 * 1024, ge=256, le=64 * 1024 * 1024)
    gpu_count: int = Field(default=1, ge=1, le=8)
    gpu_model: str = "GH100 A01 GSP BROM"
    gpu_driver_version: str = "550.90.07"
    gpu_vbios_version: str = "96.00.9F.00.04"
    # Rate limits per window, keyed by the requester, never by the operator id it names:
    # unsigned requests per client address; signed requests per signing account and, as a
    # separate budget, per client address.
    ip_limit: int = Field(default=60, ge=0)
    account_limit: int = Field(default=10, ge=0)
    signed_ip_limit: int = Field(default=60, ge=0)
    limit_window_s: float = Field(default=3600.0, gt=0)
    # The limits' salt (0600, the same secret on every instance of one database); none: the
    # salt kept in the database, created by the first instance.
    salt_file: Path | None = None

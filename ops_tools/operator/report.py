"""The final report of an onboarding, and the operator's status; pure over gathered facts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ops_tools import atomic
from ops_tools.operator.journal import Journal


def onboarding_report(journal: Journal, ran: list[str], skipped: list[str],
                      redone: dict[str, str] | None = None) -> dict[str, Any]:
    f = journal.facts
    return {
        "name": journal.name,
        "account": f.get("account"),
        "eth_address": f.get("eth_address"),
        "stake": f.get("registered_stake", f.get("stake")),
        "min_stake": f.get("min_stake"),
        "attestation_hash": f.get("attestation_hash"),
        "attestation_mock_root": f.get("attestation_mock_root"),
        "attestation_report_url": f.get("attestation_report_url"),
        "worker_url": f.get("worker_url"),
        "service": {"manager": f.get("service_manager"), "program": f.get("program")},
        "models": f.get("models", []),
        "gateway_view": f.get("gateway_view"),
        "heartbeat_epoch": f.get("heartbeat_epoch"),
        "gpu": f.get("gpu"),
        "genesis_hash": journal.genesis_hash,
        "mnemonic_backup": f.get("mnemonic_backup"),
        "journal": str(journal.path),
        "steps": [{"step": s.name, "status": s.status, "attempts": s.attempts,
                   "detail": s.detail} for s in journal.steps],
        "ran": ran,
        "skipped": skipped,
        # Steps the journal marked done whose result was gone, and why (they are in "ran").
        "redone": [{"step": step, "reason": why} for step, why in (redone or {}).items()],
    }


def heartbeat_state(last: int | None, current: int, max_advance: int = 1) -> str:
    """How the last on-chain heartbeat stands against the current epoch (the runtime's rule)."""
    if last is None:
        return "never"
    if last >= current:
        return "current"
    if current - last <= max_advance:
        return f"behind by {current - last} (one heartbeat catches up)"
    return f"behind by {current - last} epochs (the worker steps up one epoch per heartbeat)"


def save(path: Path, report: dict[str, Any]) -> None:
    """The last run's report beside the journal (what the playbook shows and tests read)."""
    atomic.write_text(path, json.dumps(report, indent=2, sort_keys=True) + "\n", mode=0o600)

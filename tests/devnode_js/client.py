"""Run ``js/client_suite.mjs`` (@polkadot/api, pinned in ``js/package-lock.json``) against a node.

The npm packages are installed into ``js/node_modules`` (gitignored) by ``scripts/bootstrap``;
``ensure_installed`` repeats that install when a test session finds it missing or stale.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

JS_DIR = Path(__file__).resolve().parent / "js"
SCRIPT = JS_DIR / "client_suite.mjs"
RUN_TIMEOUT_S = 180


def pinned_version() -> str:
    return json.loads((JS_DIR / "package.json").read_text())["dependencies"]["@polkadot/api"]


def installed_version() -> str | None:
    manifest = JS_DIR / "node_modules" / "@polkadot" / "api" / "package.json"
    try:
        return json.loads(manifest.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def ensure_installed() -> str:
    """Install the pinned client if needed; returns the problem, or '' when ready."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "node/npm not found: run scripts/bootstrap (it installs Debian's nodejs and npm)"
    if installed_version() != pinned_version():
        proc = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund"],
            cwd=JS_DIR,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if proc.returncode != 0:
            return f"npm ci in {JS_DIR} failed: {proc.stderr.strip()[-2000:]}"
    if installed_version() != pinned_version():
        return f"@polkadot/api {installed_version()} installed, {pinned_version()} pinned"
    return ""


def run_client_suite(ws_url: str) -> dict[str, Any]:
    """The script's report (its last stdout line); its stderr is kept for failure messages."""
    proc = subprocess.run(
        ["node", str(SCRIPT)],
        cwd=JS_DIR,
        env={**os.environ, "NET_WS_URL": ws_url},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    try:
        report = json.loads(lines[-1])
    except (IndexError, ValueError):
        raise AssertionError(
            f"client_suite.mjs exited {proc.returncode} without a report:\n"
            f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
        ) from None
    if "fatal" in report or proc.returncode != 0:
        raise AssertionError(
            f"client_suite.mjs failed (exit {proc.returncode}): {report.get('fatal')}\n"
            f"{proc.stderr[-4000:]}"
        )
    return report


def check_in_block_then_finalized(step: dict[str, Any]) -> None:
    """The watcher saw the block (with its events) before its finality, for the same block."""
    statuses = step["statuses"]
    assert "InBlock" in statuses, f"the client never delivered inBlock: {statuses}"
    assert statuses.index("InBlock") < statuses.index("Finalized"), statuses
    assert step["inBlock"]["events"], step
    assert step["finalized"]["hash"] == step["inBlock"]["hash"]


def check_connection(report: dict[str, Any], token_symbol: str) -> None:
    assert report["logged"] == [], f"the client logged warnings or errors: {report['logged']}"
    assert report["metadataVersion"] == 15
    assert report["properties"] == {
        "ss58Format": 42,
        "tokenDecimals": 12,
        "tokenSymbol": token_symbol,
    }
    assert int(report["minStake"]) == 1_000_000_000_000


def check_transfer(report: dict[str, Any]) -> None:
    transfer = report["transfer"]
    check_in_block_then_finalized(transfer)
    assert "balances.Transfer" in transfer["inBlock"]["events"]
    assert "system.ExtrinsicSuccess" in transfer["inBlock"]["events"]
    assert int(report["operatorFree"]) == 3 * int(report["minStake"])


def check_registration(report: dict[str, Any]) -> None:
    below, at = report["registerBelowMin"], report["registerAtMin"]
    for step in (below, at):
        check_in_block_then_finalized(step)
    assert below["inBlock"]["error"] == {"module": "operatorStake.StakeBelowMinimum"}
    assert "system.ExtrinsicFailed" in below["inBlock"]["events"]
    assert at["inBlock"]["error"] is None
    assert "operatorStake.OperatorRegistered" in at["inBlock"]["events"]
    assert report["operatorRecord"]["stake"] == int(report["minStake"])


def check_heartbeats(report: dict[str, Any]) -> None:
    current, ahead = report["heartbeatCurrent"], report["heartbeatTwoAhead"]
    for step in (current, ahead):
        check_in_block_then_finalized(step)
    assert current["inBlock"]["error"] is None
    assert "operatorStake.HeartbeatReceived" in current["inBlock"]["events"]
    assert ahead["inBlock"]["error"] == {"module": "operatorStake.HeartbeatEpochTooFarAhead"}
    assert report["operatorRecord"]["lastHeartbeatEpoch"] == report["epoch"]


def check_finalized_heads(report: dict[str, Any]) -> None:
    heads = report["finalizedHeads"]
    assert len(set(heads)) >= 2, f"subscribeFinalizedHeads did not advance: {heads}"
    assert heads == sorted(heads)


def check_report(report: dict[str, Any], token_symbol: str) -> None:
    """Everything the suite asks of a node, whichever network it is (dev or local)."""
    check_connection(report, token_symbol)
    check_transfer(report)
    check_registration(report)
    check_heartbeats(report)
    check_finalized_heads(report)

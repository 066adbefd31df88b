"""Smoke checks of a freshly built node binary, before it may become an artifact."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from ops_tools.errors import OpsError

TESTNET_CHAIN_ID = "net_testnet"
DEV_RUNTIME_FEATURE = "dev-runtime"


def _run(cmd: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, check=False, errors="replace")
    except subprocess.TimeoutExpired:
        raise OpsError(
            f"smoke check: `{' '.join(cmd)}` did not answer within {timeout:.0f}s"
        ) from None
    except OSError as exc:
        raise OpsError(f"smoke check: {cmd[0]} does not run on this host ({exc})") from None


def check_version(binary: Path) -> str:
    """``<binary> --version`` answers with one line; it goes into the manifest."""
    proc = _run([str(binary), "--version"], 30)
    first = proc.stdout.strip().splitlines()[0] if proc.stdout.strip() else ""
    if proc.returncode != 0 or not first:
        raise OpsError(
            f"smoke check failed: `{binary.name} --version` exited {proc.returncode}"
            f" with {(proc.stderr.strip() or 'no output')[-200:]!r}"
        )
    return first


def feature_enabled(features: tuple[str, ...], feature: str = DEV_RUNTIME_FEATURE) -> bool:
    return any(f == feature or f.endswith("/" + feature) for f in features)


def check_chain(binary: Path, chain_id: str, features: tuple[str, ...]) -> None:
    """``<binary> build-spec --chain <id>`` prints a spec of that id: what a real Substrate
    node does for a chain it knows, and what only a dev-runtime build can do for the testnet."""
    # A real node's build-spec would otherwise add a default bootnode, creating a network key
    # under the user's default base path: keep the check free of side effects.
    with tempfile.TemporaryDirectory(prefix="ops-tools-smoke-") as base:
        proc = _run([str(binary), "build-spec", "--chain", chain_id, "--disable-default-bootnode",
                     "--base-path", base], 120)
    spec_id = None
    if proc.returncode == 0:
        try:
            spec = json.loads(proc.stdout)
            spec_id = spec.get("id") if isinstance(spec, dict) else None
        except json.JSONDecodeError:
            spec_id = None
        if spec_id == chain_id:
            return
    said = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1][:200]
    if not feature_enabled(features):
        raise OpsError(
            f"smoke check failed: the node does not know chain id {chain_id!r} because the"
            f" {DEV_RUNTIME_FEATURE} feature is missing"
            f" (features: {', '.join(features) or 'none'});"
            f" rebuild with --features {DEV_RUNTIME_FEATURE} (node said: {said})"
        )
    raise OpsError(
        f"smoke check failed: `{binary.name} build-spec --chain {chain_id}` did not print a spec"
        f" with id {chain_id!r} although {DEV_RUNTIME_FEATURE} is on (exit {proc.returncode},"
        f" node said: {said}); does this revision define the testnet chain?"
    )

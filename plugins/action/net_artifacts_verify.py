"""Controller-side verification of the artifacts a node is deployed from, before anything moves.

Runs on the controller (an action plugin never reaches the host), so a wrong binary or a spec
whose genesis differs from its render manifest stops the play before any file is copied or any
service restarts. The genesis math is ops_tools.chainspec's, never a copy of it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ops_tools.chainspec.genesis import compute_genesis
from ops_tools.chainspec.spec import load_spec
from ops_tools.checksums import sha256_file
from ops_tools.errors import OpsError


def _norm_sha256(value: str) -> str:
    return value.strip().lower().removeprefix("sha256:")


def _load_manifest(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise AnsibleActionFail(
            f"render manifest {path}: no such file; render the spec first"
            " (ops-tools chainspec render --out DIR) and point the chainspec dir at DIR"
        ) from None
    except (OSError, ValueError) as exc:
        raise AnsibleActionFail(f"render manifest {path}: unreadable or not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise AnsibleActionFail(f"render manifest {path}: expected a JSON object")
    for key in ("genesis_hash", "raw_spec_sha256"):
        if not isinstance(data.get(key), str):
            raise AnsibleActionFail(
                f"render manifest {path}: field {key!r} is missing or not a string"
            )
    return data


def verify(
    raw_spec: Path, manifest_path: Path, binary: Path | None, binary_sha256: str | None
) -> dict[str, Any]:
    """Check binary and spec against what they must be; return the facts the roles need."""
    out: dict[str, Any] = {}
    if binary is not None:
        if not binary.is_file():
            raise AnsibleActionFail(f"node binary {binary}: no such file (node_binary_src)")
        expected = _norm_sha256(binary_sha256 or "")
        seen = sha256_file(binary)
        if seen != expected:
            raise AnsibleActionFail(
                f"node binary {binary}: sha256 is {seen}, expected {expected or '(empty)'}"
                " (node_binary_sha256); refusing to deploy it, nothing was changed"
            )
        out["binary_sha256"] = seen
    manifest = _load_manifest(manifest_path)
    try:
        spec = load_spec(raw_spec)
        if spec.kind != "raw":
            raise AnsibleActionFail(
                f"chain spec {raw_spec}: is a {spec.kind} spec; nodes are deployed from the raw one"
            )
        info = compute_genesis(spec)
    except OpsError as exc:
        raise AnsibleActionFail(str(exc)) from None
    want_sha = _norm_sha256(manifest["raw_spec_sha256"])
    if spec.sha256 != want_sha:
        raise AnsibleActionFail(
            f"raw chain spec {raw_spec}: sha256 is {spec.sha256}, but {manifest_path} says"
            f" {want_sha}; re-render the spec, nothing was changed"
        )
    genesis = "0x" + info.genesis_hash.hex()
    want_genesis = manifest["genesis_hash"].lower()
    if genesis != want_genesis:
        raise AnsibleActionFail(
            f"raw chain spec {raw_spec}: genesis hash computed offline is {genesis}, but"
            f" {manifest_path} says {want_genesis}; re-render the spec, nothing was changed"
        )
    chain_id = spec.data.get("id")
    network = manifest.get("network") if isinstance(manifest.get("network"), dict) else {}
    if network.get("id") not in (None, chain_id):
        raise AnsibleActionFail(
            f"raw chain spec {raw_spec}: chain id is {chain_id!r}, but {manifest_path} says"
            f" network.id {network.get('id')!r}"
        )
    runtime = manifest.get("runtime") if isinstance(manifest.get("runtime"), dict) else {}
    node = manifest.get("node") if isinstance(manifest.get("node"), dict) else {}
    out.update(
        genesis_hash=genesis,
        raw_spec_sha256=spec.sha256,
        chain_id=chain_id,
        chain_name=spec.data.get("name"),
        pallet_suite_revision=manifest.get("pallet_suite_revision"),
        runtime={
            "spec_name": runtime.get("spec_name"),
            "spec_version": runtime.get("spec_version"),
        },
        rendered_with=node.get("version"),
    )
    return out


class ActionModule(ActionBase):
    """net_artifacts_verify: raw_spec, manifest, binary (optional), binary_sha256."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _requires_connection = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = self._task.args
        for required in ("raw_spec", "manifest"):
            if not args.get(required):
                raise AnsibleActionFail(f"net_artifacts_verify: argument {required!r} is required")
        binary = Path(args["binary"]).expanduser() if args.get("binary") else None
        if binary is not None and not args.get("binary_sha256"):
            raise AnsibleActionFail("net_artifacts_verify: binary given without binary_sha256")
        facts = verify(
            Path(args["raw_spec"]).expanduser(),
            Path(args["manifest"]).expanduser(),
            binary,
            args.get("binary_sha256"),
        )
        result.update(facts)
        result["changed"] = False
        return result

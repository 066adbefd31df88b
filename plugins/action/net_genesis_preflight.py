"""Controller-side genesis preflight of a full node: offline genesis of the raw spec against the
public node's ``chain_getBlockHash [0]``, before anything on the host changes.

An action plugin runs on the controller only, so a spec of another network (or of another
pallet-suite revision) stops the play before a file is copied or a service starts. The genesis
math and the JSON-RPC client are ops_tools', never copies of them.

On a match the raw spec is staged, byte for byte, in a controller directory next to a render
manifest that records what the preflight established; the node role deploys from that directory
and verifies the spec against it once more.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ops_tools.atomic import write_bytes
from ops_tools.chain.rpc import RpcClient, RpcError, http_url
from ops_tools.chainspec.genesis import GenesisInfo, compute_genesis
from ops_tools.chainspec.spec import LoadedSpec, load_spec
from ops_tools.errors import OpsError

RPC_ENV = "NET_RPC_URL"
OVERRIDE_VAR = "genesis_preflight_rpc_url"
SCHEMES = ("ws", "wss", "http", "https")
NOTHING_DONE = "nothing was installed or started"


def resolve_rpc_url(override: str | None, env: Mapping[str, str], default: str) -> tuple[str, str]:
    """The public endpoint and where it came from: inventory variable > $NET_RPC_URL > default."""
    if override:
        return override.strip(), f"inventory variable {OVERRIDE_VAR}"
    if env.get(RPC_ENV, "").strip():
        return env[RPC_ENV].strip(), f"environment variable {RPC_ENV}"
    return default.strip(), "genesis_preflight_public_rpc_url (the network's public URL)"


def check_rpc_url(url: str, source: str) -> str:
    """The HTTP URL to POST JSON-RPC to; ws:// and wss:// map to http:// and https://."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES or not parts.hostname:
        raise AnsibleActionFail(
            f"{source}: {url!r} is not a node RPC URL; use wss://HOST[:PORT], ws://HOST:PORT"
            f" or http(s)://HOST:PORT; {NOTHING_DONE}"
        )
    return http_url(url)


def mismatch_message(spec_src: str, spec_genesis: str, url: str, public_genesis: str) -> str:
    return (
        f"genesis mismatch: the raw chain spec {spec_src} has genesis hash {spec_genesis}"
        f" (computed offline), but the public node {url} serves genesis hash {public_genesis}"
        " (chain_getBlockHash [0]). The local runtime WASM was built from a different"
        " pallet-suite revision than the network's: rebuild it against the main branch of the"
        " pallet-suite, render the raw chain spec again and point genesis_preflight_chainspec_src"
        " and genesis_preflight_chainspec_sha256 at it (after a network reset, fetch the"
        f" network's current raw spec instead); {NOTHING_DONE}"
    )


def unreachable_message(url: str, source: str, reason: str) -> str:
    return (
        f"public RPC endpoint {url} (from {source}) did not answer chain_getBlockHash [0]:"
        f" {reason}. Check the URL and this machine's network access, or set {RPC_ENV} (or"
        f" {OVERRIDE_VAR} for this host) to a reachable node of the network; {NOTHING_DONE}"
    )


def _hex(data: bytes) -> str:
    return "0x" + data.hex()


def staged_manifest(spec: LoadedSpec, info: GenesisInfo, spec_src: str, url: str) -> bytes:
    """A render manifest for the node role, recording what the preflight checked."""
    runtime = info.runtime
    manifest = {
        "genesis_hash": _hex(info.genesis_hash),
        "state_root": _hex(info.state_root),
        "raw_spec_sha256": spec.sha256,
        "network": {"id": spec.data.get("id"), "name": spec.data.get("name")},
        "runtime": {
            "spec_name": runtime.spec_name if runtime else None,
            "spec_version": runtime.spec_version if runtime else None,
            "state_version": info.state_version,
        },
        "pallet_suite_revision": None,
        "source": {"raw_spec": spec_src, "checked_against": url},
    }
    return (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()


def _write_if_different(path: Path, data: bytes) -> bool:
    try:
        if path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    write_bytes(path, data)
    return True


def stage(stage_root: Path, spec: LoadedSpec, manifest: bytes) -> tuple[Path, bool]:
    """Stage raw.json (byte for byte) and manifest.json under <root>/<spec sha256>/."""
    target = stage_root / spec.sha256
    changed = _write_if_different(target / "raw.json", spec.raw_bytes)
    changed = _write_if_different(target / "manifest.json", manifest) or changed
    return target, changed


def _norm_sha256(value: str) -> str:
    return value.strip().lower().removeprefix("sha256:")


def offline_genesis(raw_spec: Path, want_sha256: str) -> tuple[LoadedSpec, GenesisInfo]:
    try:
        spec = load_spec(raw_spec)
    except OpsError as exc:
        raise AnsibleActionFail(f"genesis_preflight_chainspec_src: {exc}") from None
    want = _norm_sha256(want_sha256)
    if spec.sha256 != want:
        raise AnsibleActionFail(
            f"raw chain spec {raw_spec}: sha256 is {spec.sha256}, expected {want}"
            f" (genesis_preflight_chainspec_sha256); fetch the spec again or correct the"
            f" checksum; {NOTHING_DONE}"
        )
    if spec.kind != "raw":
        raise AnsibleActionFail(
            f"raw chain spec {raw_spec}: is a {spec.kind} spec; a full node joins the network"
            f" from the raw one (build-spec --raw); {NOTHING_DONE}"
        )
    try:
        return spec, compute_genesis(spec)
    except OpsError as exc:
        raise AnsibleActionFail(f"raw chain spec {raw_spec}: {exc}; {NOTHING_DONE}") from None


class ActionModule(ActionBase):
    """net_genesis_preflight: raw_spec, raw_spec_sha256, spec_src, rpc_url, default_rpc_url,
    timeout, stage_dir."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _requires_connection = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = self._task.args
        for required in ("raw_spec", "raw_spec_sha256", "default_rpc_url", "stage_dir"):
            if not args.get(required):
                raise AnsibleActionFail(f"net_genesis_preflight: argument {required!r} is required")
        raw_spec = Path(args["raw_spec"]).expanduser()
        spec_src = str(args.get("spec_src") or raw_spec)
        url, source = resolve_rpc_url(args.get("rpc_url"), os.environ, args["default_rpc_url"])
        post_url = check_rpc_url(url, source)

        spec, info = offline_genesis(raw_spec, args["raw_spec_sha256"])
        spec_genesis = _hex(info.genesis_hash)
        client = RpcClient(post_url, timeout=float(args.get("timeout", 10)))
        try:
            public_genesis = client.genesis_hash()
        except RpcError as exc:
            raise AnsibleActionFail(unreachable_message(url, source, str(exc))) from None
        public_genesis = public_genesis.lower()
        if public_genesis != spec_genesis:
            raise AnsibleActionFail(mismatch_message(spec_src, spec_genesis, url, public_genesis))

        # The staging area is the controller's cache, not the managed host: it is written in
        # check mode too, so that a check run of the node role sees the same inputs.
        stage_dir, changed = stage(
            Path(args["stage_dir"]).expanduser(),
            spec,
            staged_manifest(spec, info, spec_src, url),
        )
        result.update(
            changed=changed,
            match=True,
            genesis_hash=spec_genesis,
            public_genesis_hash=public_genesis,
            rpc_url=url,
            rpc_url_source=source,
            chain_id=spec.data.get("id"),
            chain_name=spec.data.get("name"),
            raw_spec_sha256=spec.sha256,
            chainspec_dir=str(stage_dir),
            msg=f"genesis {spec_genesis} matches the public node {url}",
        )
        return result

"""Rendering: network definition (+ runtime) -> plain spec -> node ``build-spec --raw`` -> canonical
bytes, with a manifest that links the whole chain of provenance."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ops_tools import __version__, atomic
from ops_tools.chainspec.canonical import canonical_json
from ops_tools.chainspec.genesis import compute_genesis
from ops_tools.chainspec.hashing import blake2_256
from ops_tools.chainspec.network import load_network
from ops_tools.chainspec.plain import plain_spec
from ops_tools.chainspec.runtime import read_runtime_version
from ops_tools.chainspec.spec import CODE_KEY, LoadedSpec, decode_hex
from ops_tools.checksums import sha256_file
from ops_tools.errors import InputError, OpsError

NODE_TIMEOUT_S = 300


@dataclass(frozen=True)
class Rendered:
    plain: bytes
    raw: bytes
    manifest: dict[str, Any]

    def write(self, out_dir: Path) -> None:
        # Everything is computed before the first write; the manifest goes last, so a reader that
        # finds a manifest finds the specs it describes.
        atomic.write_bytes(out_dir / "plain.json", self.plain)
        atomic.write_bytes(out_dir / "raw.json", self.raw)
        atomic.write_bytes(out_dir / "manifest.json", canonical_json(self.manifest))


def _check_node(node: Path) -> Path:
    if "/" not in str(node):
        found = shutil.which(str(node))
        node = Path(found) if found else node
    # The node runs in a scratch working directory: a relative path would point elsewhere.
    node = node.absolute()
    if not node.exists():
        raise InputError(f"node binary {node}: no such file; build it or pass --node/--artifact")
    if not node.is_file() or not os.access(node, os.X_OK):
        raise InputError(f"node binary {node}: not an executable file")
    return node


def _run_node(node: Path, args: list[str], cwd: Path) -> bytes:
    try:
        proc = subprocess.run(
            [str(node), *args], cwd=cwd, capture_output=True, timeout=NODE_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise OpsError(
            f"node binary {node}: '{' '.join(args)}' did not finish in {NODE_TIMEOUT_S} s"
        ) from None
    except OSError as exc:
        raise InputError(f"node binary {node}: cannot run it: {exc.strerror}") from None
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.decode(errors="replace").strip().splitlines()[-3:])
        raise OpsError(
            f"node binary {node}: '{' '.join(args)}' failed with exit status"
            f" {proc.returncode}: {tail}"
        )
    return proc.stdout


def node_version(node: Path) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        return _run_node(node, ["--version"], Path(tmp)).decode().strip()


def builtin_runtime(node: Path) -> bytes:
    """The runtime a node embeds, from its built-in ``dev`` chain (every Substrate node has one)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = _run_node(
            node, ["build-spec", "--chain", "dev", "--raw", "--disable-default-bootnode"], Path(tmp)
        )
    try:
        code = orjson.loads(out)["genesis"]["raw"]["top"]["0x" + CODE_KEY.hex()]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        raise OpsError(
            f"node binary {node}: its 'build-spec --chain dev --raw' has no :code to take"
        ) from None
    return decode_hex(code, "dev chain :code")


def render(
    network_file: Path,
    node: Path,
    runtime_file: Path | None = None,
    *,
    pallet_suite_revision: str | None = None,
    artifact: dict[str, Any] | None = None,
) -> Rendered:
    network = load_network(network_file)
    node = _check_node(node)
    version = node_version(node)
    if runtime_file is not None:
        try:
            runtime = runtime_file.read_bytes()
        except OSError as exc:
            raise InputError(f"runtime {runtime_file}: cannot read it: {exc.strerror}") from None
        runtime_source = runtime_file.name
    else:
        runtime = builtin_runtime(node)
        runtime_source = "node built-in (build-spec --chain dev)"
    rv = read_runtime_version(runtime)
    plain = canonical_json(plain_spec(network, runtime))
    with tempfile.TemporaryDirectory(prefix="render-") as tmp:
        plain_path = Path(tmp) / "plain.json"
        plain_path.write_bytes(plain)
        out = _run_node(
            node,
            ["build-spec", "--chain", str(plain_path), "--raw", "--disable-default-bootnode"],
            Path(tmp),
        )
    try:
        raw_obj = orjson.loads(out)
    except orjson.JSONDecodeError as exc:
        raise OpsError(
            f"node binary {node}: build-spec printed something that is not JSON: {exc}"
        ) from None
    raw = canonical_json(raw_obj)
    spec = LoadedSpec(Path("raw.json"), raw, orjson.loads(raw))
    if spec.kind != "raw":
        raise OpsError(f"node binary {node}: build-spec --raw gave a spec without genesis.raw")
    served_code = decode_hex(spec.genesis["raw"]["top"].get("0x" + CODE_KEY.hex(), "0x"), ":code")
    if served_code != runtime:
        raise OpsError(
            f"node binary {node}: the raw spec's :code differs from the runtime given"
            f" ({runtime_source}); the node substituted its own runtime"
        )
    info = compute_genesis(spec)
    manifest: dict[str, Any] = {
        "network": {
            "file": network.path.name,
            "sha256": network.sha256,
            "id": network.id,
            "name": network.data["name"],
        },
        "pallet_suite_revision": pallet_suite_revision,
        "runtime": {
            "source": runtime_source,
            "blake2_256": "0x" + blake2_256(runtime).hex(),
            "sha256": hashlib.sha256(runtime).hexdigest(),
            "spec_name": rv.spec_name if rv else None,
            "spec_version": rv.spec_version if rv else None,
            "state_version": info.state_version,
        },
        "node": {"version": version, "sha256": sha256_file(node)},
        "plain_spec_sha256": hashlib.sha256(plain).hexdigest(),
        "raw_spec_sha256": hashlib.sha256(raw).hexdigest(),
        "genesis_hash": "0x" + info.genesis_hash.hex(),
        "state_root": "0x" + info.state_root.hex(),
        "tool": {"name": "ops-tools", "version": __version__},
    }
    if artifact is not None:
        manifest["artifact"] = artifact
    return Rendered(plain, raw, manifest)

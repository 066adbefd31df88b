"""Reusing a render already done for exactly the same inputs.

Rendering runs the node (``--version``, ``build-spec``). A reset cycle that finds nothing to do,
or a ``localnet up`` that changes nothing, renders the same inputs every time, so the render
directory records the inputs it was made from (``inputs.json``); a later run reuses it only when
those inputs are the same (the network definition, the node binary and its version, the
runtime, the revision, and the renderer's own source) and the files still check out: the specs
match the checksums the render recorded, and the genesis hash recomputed from the raw spec is
the one recorded.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

from ops_tools import __version__, atomic

INPUTS_FILE = "inputs.json"


@cache
def renderer_version() -> str:
    """The tool version and a digest of the chain spec package's source (renderer, schema)."""
    import ops_tools.chainspec

    package = Path(ops_tools.chainspec.__file__).parent
    digest = hashlib.sha256(__version__.encode())
    for path in sorted([*package.glob("*.py"), *package.glob("*.json")]):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return f"{__version__}+{digest.hexdigest()[:16]}"


@dataclass(frozen=True)
class RenderInputs:
    network_sha256: str
    node_binary_sha256: str
    # What identifies the node's code where its binary does not (a launcher script).
    node_version: str | None
    # None: the node's built-in runtime, identified with the node itself.
    runtime_sha256: str | None
    revision: str | None
    renderer: str


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def cached_genesis(out: Path, inputs: RenderInputs) -> str | None:
    """The expected genesis hash of the render in ``out`` if it was made from ``inputs``."""
    try:
        recorded = json.loads((out / INPUTS_FILE).read_text())
        manifest = json.loads((out / "manifest.json").read_text())
        raw = (out / "raw.json").read_bytes()
        plain = (out / "plain.json").read_bytes()
    except (OSError, ValueError):
        return None
    if recorded != asdict(inputs) or not isinstance(manifest, dict):
        return None
    # What the renderer wrote must agree with the inputs and with the files beside it.
    if (
        manifest.get("network", {}).get("sha256") != inputs.network_sha256
        or manifest.get("node", {}).get("sha256") != inputs.node_binary_sha256
        or (
            inputs.runtime_sha256 is not None
            and manifest.get("runtime", {}).get("sha256") != inputs.runtime_sha256
        )
        or manifest.get("pallet_suite_revision") != inputs.revision
        or manifest.get("raw_spec_sha256") != _sha256(raw)
        or manifest.get("plain_spec_sha256") != _sha256(plain)
    ):
        return None
    genesis = manifest.get("genesis_hash")
    return genesis if genesis and genesis == genesis_of_raw(out / "raw.json", raw) else None


def genesis_of_raw(path: Path, raw: bytes) -> str | None:
    """The genesis hash a raw spec commits to, computed from its storage."""
    import orjson

    from ops_tools.chainspec.genesis import compute_genesis
    from ops_tools.chainspec.spec import LoadedSpec
    from ops_tools.errors import OpsError

    try:
        spec = LoadedSpec(path, raw, orjson.loads(raw))
        if spec.kind != "raw":
            return None
        return "0x" + compute_genesis(spec).genesis_hash.hex()
    except (OpsError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


def forget(out: Path) -> None:
    """Before a render rewrites ``out``: until it is recorded again, nothing there is reused."""
    (out / INPUTS_FILE).unlink(missing_ok=True)


def record(out: Path, inputs: RenderInputs) -> None:
    atomic.write_bytes(out / INPUTS_FILE, json.dumps(asdict(inputs), sort_keys=True).encode())


def render_cached(
    out: Path,
    inputs: RenderInputs | None,
    network: Path,
    node: Path,
    runtime: Path | None = None,
    *,
    pallet_suite_revision: str | None = None,
) -> tuple[str, bool]:
    """Render ``network`` into ``out`` unless the render there was made from ``inputs`` and
    checks out (without inputs: always render); returns (genesis hash, reused)."""
    genesis = cached_genesis(out, inputs) if inputs is not None else None
    if genesis is not None:
        return genesis, True
    from ops_tools.chainspec.render import render

    rendered = render(network, node, runtime, pallet_suite_revision=pallet_suite_revision)
    forget(out)
    current = out / "raw.json"
    # Same bytes, same file: leaving it untouched keeps a no-change run free of changes.
    if not (
        current.exists()
        and current.read_bytes() == rendered.raw
        and (out / "manifest.json").exists()
    ):
        rendered.write(out)
    if inputs is not None:
        record(out, inputs)
    return str(rendered.manifest["genesis_hash"]), False

"""Render twice in processes that differ in everything that should not matter, and compare."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import orjson

from ops_tools.chainspec.diff import describe_path, first_difference
from ops_tools.errors import OpsError

# Two environments that differ in working directory (set per run), TMPDIR, TZ, locale,
# PYTHONHASHSEED and umask. Anything a render reads from them shows up as a byte difference.
VARIANTS = [
    {"TZ": "UTC", "LC_ALL": "C", "LANG": "C", "PYTHONHASHSEED": "1", "umask": 0o022},
    {
        "TZ": "Pacific/Chatham",
        "LC_ALL": "C.UTF-8",
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": "4242",
        "umask": 0o077,
    },
]
FILES = ("raw.json", "plain.json", "manifest.json")


@dataclass(frozen=True)
class DeterminismResult:
    identical: bool
    raw_sha256: str
    genesis_hash: str
    difference: str | None


@dataclass(frozen=True)
class RenderRequest:
    """What a render reads, with absolute paths (the renders run in other directories)."""

    network: Path
    node: Path
    runtime: Path | None = None
    revision: str | None = None
    artifact: dict[str, object] | None = None


def _render_in(variant: dict[str, object], base: Path, request: RenderRequest) -> Path:
    work = base / f"cwd-{variant['PYTHONHASHSEED']}"
    tmp = base / f"tmp-{variant['PYTHONHASHSEED']}"
    out = base / f"out-{variant['PYTHONHASHSEED']}"
    for d in (work, tmp):
        d.mkdir()
    request_file = base / f"request-{variant['PYTHONHASHSEED']}.json"
    request_file.write_text(json.dumps({
        "network": str(request.network.resolve()),
        "node": str(request.node.resolve()),
        "runtime": str(request.runtime.resolve()) if request.runtime else None,
        "revision": request.revision,
        "artifact": request.artifact,
        "out": str(out),
    }))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "PYTHONHASHSEED"))}
    env.update({k: str(v) for k, v in variant.items() if k != "umask"})
    env["TMPDIR"] = str(tmp)
    umask = int(variant["umask"])  # type: ignore[call-overload]
    proc = subprocess.run(
        [sys.executable, "-m", "ops_tools.chainspec.render_worker", str(request_file)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        preexec_fn=lambda: os.umask(umask),
    )
    if proc.returncode != 0:
        raise OpsError(
            f"render in variant {variant}: failed: {proc.stderr.strip().splitlines()[-1:]}"
        )
    return out


def verify_determinism(request: RenderRequest) -> DeterminismResult:
    with tempfile.TemporaryDirectory(prefix="determinism-") as tmp:
        base = Path(tmp)
        a, b = (_render_in(v, base, request) for v in VARIANTS)
        manifest = orjson.loads((a / "manifest.json").read_bytes())
        for name in FILES:
            ba, bb = (a / name).read_bytes(), (b / name).read_bytes()
            if ba != bb:
                where = first_difference(orjson.loads(ba), orjson.loads(bb))
                detail = describe_path(where) if where else "formatting only"
                return DeterminismResult(
                    False,
                    manifest["raw_spec_sha256"],
                    manifest["genesis_hash"],
                    f"{name}: first difference at {detail}",
                )
        return DeterminismResult(True, manifest["raw_spec_sha256"], manifest["genesis_hash"], None)

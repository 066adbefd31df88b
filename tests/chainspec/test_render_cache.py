"""A render is reused only for the same inputs, and only when its files still check out."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from pathlib import Path

import pytest

from ops_tools.chainspec import render_cache
from ops_tools.chainspec.render import render
from ops_tools.chainspec.render_cache import RenderInputs, cached_genesis
from tests.conftest import ROOT

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)

LOCAL = ROOT / "chainspec" / "networks" / "local.yml"
DEVNODE = Path(sys.executable).with_name("devnode")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> tuple[Path, RenderInputs, str]:
    if not DEVNODE.exists():
        pytest.fail(f"the development node is not installed at {DEVNODE}; run scripts/bootstrap")
    out = tmp_path_factory.mktemp("render") / "rev1"
    result = render(LOCAL, DEVNODE, pallet_suite_revision="rev1")
    result.write(out)
    m = result.manifest
    inputs = RenderInputs(
        network_sha256=hashlib.sha256(LOCAL.read_bytes()).hexdigest(),
        node_binary_sha256=m["node"]["sha256"],
        node_version=m["node"]["version"],
        runtime_sha256=m["runtime"]["sha256"],
        revision="rev1",
        renderer=render_cache.renderer_version(),
    )
    render_cache.record(out, inputs)
    return out, inputs, m["genesis_hash"]


def copy(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def test_same_inputs_reuse_the_recorded_genesis(rendered):
    out, inputs, genesis = rendered
    assert cached_genesis(out, inputs) == genesis


@pytest.mark.parametrize(
    "field",
    [
        "network_sha256",
        "node_binary_sha256",
        "node_version",
        "runtime_sha256",
        "revision",
        "renderer",
    ],
)
def test_any_other_input_is_a_miss(rendered, field):
    out, inputs, _ = rendered
    assert cached_genesis(out, dataclasses.replace(inputs, **{field: "other"})) is None


def test_a_raw_spec_changed_after_the_render_is_a_miss(rendered, tmp_path):
    out, inputs, _ = rendered
    d = copy(out, tmp_path / "r")
    raw = json.loads((d / "raw.json").read_text())
    top = raw["genesis"]["raw"]["top"]
    key = next(k for k in top if k != "0x3a636f6465")  # any storage item but :code
    top[key] = "0x00"
    changed = json.dumps(raw).encode()
    (d / "raw.json").write_bytes(changed)
    assert cached_genesis(d, inputs) is None
    # Even with the manifest's checksum made to match, the recomputed genesis gives it away.
    manifest = json.loads((d / "manifest.json").read_text())
    manifest["raw_spec_sha256"] = hashlib.sha256(changed).hexdigest()
    (d / "manifest.json").write_text(json.dumps(manifest))
    assert cached_genesis(d, inputs) is None


def test_a_render_being_rewritten_is_not_reused(rendered, tmp_path):
    out, inputs, genesis = rendered
    d = copy(out, tmp_path / "r")
    assert cached_genesis(d, inputs) == genesis
    render_cache.forget(d)
    assert cached_genesis(d, inputs) is None
    assert cached_genesis(tmp_path / "missing", inputs) is None


def test_the_renderer_version_follows_the_renderers_source(tmp_path, monkeypatch):
    import ops_tools.chainspec

    package = Path(ops_tools.chainspec.__file__).parent
    work = tmp_path / "chainspec"
    work.mkdir()
    for f in [*package.glob("*.py"), *package.glob("*.json")]:
        (work / f.name).write_bytes(f.read_bytes())
    monkeypatch.setattr(ops_tools.chainspec, "__file__", str(work / "__init__.py"))
    version = render_cache.renderer_version.__wrapped__
    assert version() == render_cache.renderer_version()
    render_py = work / "render.py"
    render_py.write_text(render_py.read_text() + "\n# a change to the renderer\n")
    assert version() != render_cache.renderer_version()


def test_the_cycle_renders_once_per_inputs(tmp_path, monkeypatch):
    from ops_tools.chainspec.render import builtin_runtime
    from ops_tools.reset import inspection
    from ops_tools.reset.cycle import Options, ResetCycle

    monkeypatch.setenv("NET_OPS_STATE", str(tmp_path / "state"))
    runtime = tmp_path / "runtime.wasm"
    runtime.write_bytes(builtin_runtime(DEVNODE))
    cycle = ResetCycle(Options(ROOT / "inventories" / "local", repo="unused", ref="main"))
    facts = {
        "revision": "rev1",
        "node_binary": str(DEVNODE),
        "runtime": str(runtime),
        "binary_sha256": hashlib.sha256(DEVNODE.read_bytes()).hexdigest(),
        "runtime_sha256": hashlib.sha256(runtime.read_bytes()).hexdigest(),
        "node_version": "devnode test",
    }
    ctx = cycle.ctx
    ctx.facts = dict(facts)
    first = inspection.render(ctx)
    assert "reused" not in first
    expected = ctx.facts["expected_genesis"]
    ctx.facts = dict(facts)
    assert inspection.render(ctx) == f"{expected} (render reused: same inputs, checked)"
    assert ctx.facts["expected_genesis"] == expected
    # a new renderer (its source changed) renders again
    monkeypatch.setattr(render_cache, "renderer_version", lambda: "0.1.0+another")
    ctx.facts = dict(facts)
    assert "reused" not in inspection.render(ctx)
    assert ctx.facts["expected_genesis"] == expected

"""The services hosts' virtualenv (venv_bundle.py) is a hand-picked part of ops_tools: every
module of the suite that its files import, at module level or inside a function, must be in it,
or a service dies at its first start on the host (as net-attestation did when the attestation
formats moved to ops_tools/attestation)."""

from __future__ import annotations

import ast
import importlib.util
import os
import py_compile
from pathlib import Path

from tests.hosts.venv_bundle import SCRIPTS, _scripts, _suite_files, compiled_caches


def _imports(source: bytes) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n for n in names if n.split(".")[0] == "ops_tools"}


def _bundled_modules(files: dict[str, bytes]) -> set[str]:
    return {path[:-3].replace("/", ".").removesuffix(".__init__")
            for path in files if path.endswith(".py")}


def _unresolved(files: dict[str, bytes], extra: dict[str, str]) -> set[str]:
    have = _bundled_modules(files)
    sources = {**files, **{name: text.encode() for name, text in extra.items()}}
    missing = set()
    for name, data in sources.items():
        if not (name.endswith(".py") or name in extra):
            continue
        for module in _imports(data):
            # "from pkg.mod import name": the name may be an attribute, not a module.
            if module not in have and module.rsplit(".", 1)[0] not in have:
                missing.add(f"{module} (imported by {name})")
    return missing


def test_every_suite_module_the_bundle_imports_is_in_it() -> None:
    assert _unresolved(_suite_files(), _scripts()) == set()


def test_a_module_left_out_is_found() -> None:
    files = _suite_files()
    left_out = {p: b for p, b in files.items() if not p.startswith("ops_tools/attestation/")}
    assert any(m.startswith("ops_tools.attestation") for m in _unresolved(left_out, {}))
    assert set(SCRIPTS) == set(_scripts())


def test_the_bundle_carries_current_byte_code_caches_and_sources_mtimes(tmp_path) -> None:
    """A cache whose source it no longer matches would be compiled again on the host: left out."""
    site = tmp_path / "site-packages"
    (site / "pkg").mkdir(parents=True)
    fresh, stale = site / "pkg" / "fresh.py", site / "pkg" / "stale.py"
    fresh.write_text("VALUE = 1\n")
    stale.write_text("VALUE = 2\n")
    for source in (fresh, stale):
        py_compile.compile(str(source), doraise=True,
                           invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
    os.utime(fresh, (1_700_000_000, 1_700_000_000))
    py_compile.compile(str(fresh), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
    stale.write_text("VALUE = 22\n")  # edited after its cache was written
    site_files = {"pkg/fresh.py": fresh.read_bytes(), "pkg/stale.py": stale.read_bytes(),
                  "pkg/data.txt": b"x"}

    caches = compiled_caches(site_files, site)

    assert caches.mtimes == {"pkg/fresh.py": 1_700_000_000}
    name = Path(importlib.util.cache_from_source("pkg/fresh.py")).as_posix()
    assert caches.files == {name: Path(importlib.util.cache_from_source(str(fresh))).read_bytes()}
    # A file that differs from what is bundled (the suite's own, say) brings no cache either.
    assert compiled_caches({"pkg/fresh.py": b"VALUE = 3\n"}, site).files == {}

"""The services hosts' virtualenv (venv_bundle.py) is a hand-picked part of ops_tools: every
module of the suite that its files import, at module level or inside a function, must be in it,
or a service dies at its first start on the host (as net-attestation did when the attestation
formats moved to ops_tools/attestation)."""

from __future__ import annotations

import ast

from tests.hosts.venv_bundle import SCRIPTS, _scripts, _suite_files


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

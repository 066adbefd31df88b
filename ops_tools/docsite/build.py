"""Build the site: stage the Markdown (the project's docs, the operator guides, the generated
pages and the release files), run MkDocs' build in strict mode, check its links, and switch the
served directory to the new build in one rename.

``<site>`` is a symbolic link to ``<site>.builds/<digest>``; a build whose staged inputs are
the same as the served build's is skipped (``changed`` false), so a converge that changes
nothing rebuilds nothing.

The release files (a development-node bundle is tens of MB) never go through MkDocs: each is
staged as a small stand-in holding its sha256 (so the digest and MkDocs' link validation see
it), and the build's stand-ins are replaced by hard links to the store's files afterwards.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ops_tools.docsite import pages
from ops_tools.docsite.identity import ChainIdentity, identity_of_file
from ops_tools.docsite.linkcheck import check_site
from ops_tools.docsite.releases import CURRENT, current_release
from ops_tools.docsite.sources import Sources, default_sources
from ops_tools.docsite.store import RAW, read_index
from ops_tools.errors import InputError, OpsError

KEEP_BUILDS = 2
__all__ = ["Built", "Sources", "build_site", "default_sources", "stage"]
# The readiness document: what the deployment, ops-tools status and the reset cycle compare with
# the genesis the network serves (GET {docs_url}/releases/current/release.json).
RELEASE_JSON = "release.json"


@dataclass(frozen=True)
class Built:
    changed: bool
    site: Path
    build_dir: Path
    digest: str
    current_genesis: str | None
    pages: int


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


def release_document(release: dict[str, Any]) -> dict[str, Any]:
    """``/releases/current/release.json``: the current release as a program reads it."""
    keys = ("genesis_hash", "chain_id", "chain_name", "pallet_suite_revision",
            "runtime_spec_version", "node_kind", "node_version", "node_file", "published_at",
            "updated_at", "files")
    return {"schema": 1, "status": CURRENT, **{k: release.get(k) for k in keys}}


@dataclass(frozen=True)
class Staged:
    config: dict[str, Any]
    genesis: str | None
    # Path in the site -> the store's file its stand-in is replaced with after the build.
    release_files: dict[str, Path]


def stage(sources: Sources, store: Path, endpoints: dict[str, str], docs: Path) -> Staged:
    """Write the site's Markdown and the release files' stand-ins into ``docs``."""
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
    release_files: dict[str, Path] = {}
    for release in index["releases"]:
        folders = [release["genesis_hash"]]
        if release.get("status") == CURRENT:
            folders.append("current")
        for name, meta in release["files"].items():
            src = store / release["genesis_hash"] / name
            if not src.is_file():
                raise InputError(f"release store {store}: {src} is listed in its index but missing")
            for folder in folders:
                rel = f"releases/{folder}/{name}"
                (docs / rel).parent.mkdir(parents=True, exist_ok=True)
                (docs / rel).write_text(f"{meta['sha256']}\n")
                release_files[rel] = src
    if current is not None:
        (docs / "releases" / "current" / RELEASE_JSON).write_text(
            json.dumps(release_document(current), indent=1, sort_keys=True) + "\n"
        )
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
    return Staged(config, current["genesis_hash"] if current else None, release_files)


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


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname}: {record.getMessage()}")


def run_mkdocs(config_file: Path) -> None:
    """MkDocs' own build, strict, in this process: a second interpreter would cost more than
    the build of the site's few pages."""
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import MkDocsException

    log = logging.getLogger("mkdocs")
    collect = _Collect()
    saved = log.level, log.propagate
    # Strict mode counts the WARNINGs that reach mkdocs' logger, whatever the host process
    # (ops-tools, an Ansible worker) configured; they are reported here, not on stderr.
    log.setLevel(logging.WARNING)
    log.propagate = False
    log.addHandler(collect)
    try:
        build(load_config(str(config_file), strict=True))
    except (MkDocsException, OSError) as exc:
        shown = " | ".join([*collect.lines[-8:], exc.format_message()
                            if isinstance(exc, MkDocsException) else str(exc)])
        raise OpsError(f"mkdocs build --strict failed: {shown}") from None
    finally:
        log.removeHandler(collect)
        log.level, log.propagate = saved


def _put_release_files(out: Path, release_files: dict[str, Path]) -> None:
    for rel, src in release_files.items():
        dest = out / rel
        dest.unlink()
        _link_or_copy(src, dest)


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
        staged = stage(sources, store, endpoints, docs)
        config, genesis = staged.config, staged.genesis
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
        _put_release_files(out, staged.release_files)
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
